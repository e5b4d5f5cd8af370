"""A submitter's cap on open batches (`limits.size.open_batches_per_key`),
taken in the transaction that records the batch (docs/architecture.md,
"Flow control"): the count and the insert are one step, so two submits of
one submitter at one below the cap cannot both pass. SQLite's writer holds
the file's lock from BEGIN IMMEDIATE; PostgreSQL's holds an advisory lock
of the submitter until it commits, so the next one counts its row."""

from __future__ import annotations

import hashlib
from datetime import datetime

from sqlalchemy import Connection, func, select
from sqlalchemy import text as sql

from runtime.errors import TooManyOpenBatches
from runtime.ledger.tables import BatchRow, utc_now

BATCHES = BatchRow.__table__
LOCK_SPACE = int.from_bytes(b"tro", "big")  # submitters' locks: apart from the batches'
LOCK = sql("SELECT pg_advisory_xact_lock(:space, :key)")


def count(connection: Connection, submitter: str, *, now: datetime) -> int:
    """How many batches of `submitter` are open: not ended, deadline ahead."""
    query = select(func.count()).where(
        BATCHES.c.submitter == submitter,
        BATCHES.c.ended_at.is_(None),
        BATCHES.c.deadline_at > now,
    )
    return int(connection.execute(query).scalar() or 0)


def check(connection: Connection, submitter: str, cap: int) -> None:
    """Refuse the batch just inserted if it makes one more than `cap` (the
    transaction rolls back: nothing of it is written). On PostgreSQL the
    submitter's lock is held until the transaction ends (SQLite's writer
    holds the file's already): another submit of theirs counting meanwhile
    waits, then counts this batch's row once it is committed."""
    if connection.dialect.name == "postgresql":
        digest = hashlib.blake2b(submitter.encode(), digest_size=4).digest()
        key = int.from_bytes(digest, "big") - 2**31
        connection.execute(LOCK, {"space": LOCK_SPACE, "key": key})
    if count(connection, submitter, now=utc_now()) > cap:
        raise refusal(submitter, cap)


def refusal(submitter: str, cap: int) -> TooManyOpenBatches:
    return TooManyOpenBatches(
        f"{submitter} has {cap} batches open, as many as the policy allows "
        "(limits.size.open_batches_per_key); wait for one to end, or cancel one"
    )
