"""Retention: ended batches are kept for a period (the org policy file's
`retention`, else `TOOLRUN_RETENTION_DAYS`), then removed whole, every row of
theirs in every ledger table, and the space they took given back
(docs/architecture.md, "Retention").

A batch is removed only once it has ended (`ended_at` set, which an open batch
never has) before the cut-off; the check is made again in the transaction
that deletes it. Batches go in chunks, each chunk its own short transaction,
so a prune never holds the write lock for long: on SQLite every other writer
gets its turn between two chunks. `export`, when given, is called with each
batch's id before its chunk is deleted (a JSON Lines transcript, in
`runtime.transcript.archive`); a batch whose export fails is not removed.
Remembered rules stay: they came from a batch, but they are policy now.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, select, text

from runtime.ledger.database import Database
from runtime.ledger.rows import lock_batches
from runtime.ledger.tables import (
    ApprovalRow,
    BatchOwnerRow,
    BatchRow,
    CallRow,
    EndRow,
    EventRow,
    PlanRow,
    UsageRow,
    utc_now,
)

BATCHES = BatchRow.__table__
# Every table holding rows of a batch (but the batch row, deleted last).
OF_A_BATCH = [
    t.__table__ for t in (EventRow, UsageRow, EndRow, ApprovalRow, CallRow, PlanRow, BatchOwnerRow)
]
CHUNK = 50  # batches per transaction (500 calls): tens of ms of the write lock on SQLite
VACUUM_PAGES = 2000  # SQLite pages (4 KiB) an incremental vacuum gives back per step


@dataclass
class Pruned:
    """What a prune did: batches removed and exported, what reclaimed their space."""

    batches: int = 0
    exported: int = 0
    failed_exports: int = 0
    reclaimed: str = "nothing"
    seconds: float = 0.0  # in all
    reclaim_seconds: float = 0.0  # of which giving the space back took


def cutoff(days: float, *, now: datetime | None = None) -> datetime:
    """Batches that ended before this are due."""
    return (now or utc_now()) - timedelta(days=days)


def due(database: Database, before: datetime, limit: int = CHUNK) -> list[str]:
    """The ids of at most `limit` batches that ended before `before`, oldest first."""
    query = (
        select(BATCHES.c.id)
        .where(BATCHES.c.ended_at.is_not(None), BATCHES.c.ended_at < before)
        .order_by(BATCHES.c.ended_at)
        .limit(limit)
    )
    return database.transaction(
        lambda c: [row[0] for row in c.execute(query)], write=False, core=True
    )


def remove(connection: Connection, ids: list[str], before: datetime) -> int:
    """Delete the batches of `ids` still ended before `before`, with all their
    rows; how many. The check is made here, under the batches' locks, so an id
    read a moment ago that is somehow open is never touched."""
    lock_batches(connection, set(ids))
    still = select(BATCHES.c.id).where(
        BATCHES.c.id.in_(ids), BATCHES.c.ended_at.is_not(None), BATCHES.c.ended_at < before
    )
    gone = [row[0] for row in connection.execute(still)]
    if not gone:
        return 0
    for table in OF_A_BATCH:
        connection.execute(delete(table).where(table.c.batch_id.in_(gone)))
    connection.execute(delete(BATCHES).where(BATCHES.c.id.in_(gone)))
    return len(gone)


def prune(
    database: Database,
    before: datetime,
    *,
    export: Callable[[str], object] | None = None,
    chunk: int = CHUNK,
    max_chunks: int | None = None,
    reclaim: bool = True,
    full_vacuum: bool = False,
) -> Pruned:
    """Remove every batch that ended before `before` (at most `max_chunks`
    chunks of `chunk`), exporting each first when `export` is given; then
    give the space back (`reclaim_space`)."""
    began, found, skipped = time.monotonic(), Pruned(), set()
    chunks = 0
    while max_chunks is None or chunks < max_chunks:
        ids = [i for i in due(database, before, chunk + len(skipped)) if i not in skipped]
        if not ids:
            break
        chunks += 1
        if export is not None:
            kept = []
            for batch_id in ids:
                try:
                    export(batch_id)
                except OSError:
                    skipped.add(batch_id)  # its transcript is not safe yet: the batch stays
                    found.failed_exports += 1
                    continue
                kept.append(batch_id)
            ids = kept
            found.exported += len(ids)
        if ids:
            found.batches += database.transaction(
                lambda c, ids=ids: remove(c, ids, before), core=True
            )
    if reclaim and found.batches:
        reclaiming = time.monotonic()
        found.reclaimed = reclaim_space(database, full=full_vacuum)
        found.reclaim_seconds = round(time.monotonic() - reclaiming, 3)
    found.seconds = round(time.monotonic() - began, 3)
    return found


def reclaim_space(database: Database, *, full: bool = False) -> str:
    """Give the space of deleted rows back; what was done.

    SQLite: on a file with incremental auto-vacuum (every ledger toolrun
    makes now: `runtime.ledger.engine`), free pages go back to the file
    system in short steps; an older file keeps them for new rows unless
    `full`, a `VACUUM` that rewrites the file (and turns incremental
    auto-vacuum on) while it holds the write lock the whole time.
    PostgreSQL: a plain `VACUUM` of each table, outside a transaction: the
    space is reused by new rows, with no lock that stops writers."""
    if database.dialect == "postgresql":
        names = [t.name for t in (*OF_A_BATCH, BATCHES)]
        database.outside_transaction(lambda raw: [raw.execute(f"VACUUM {n}") for n in names])
        return "VACUUM of " + ", ".join(names)
    mode = database.outside_transaction(lambda raw: raw.execute("PRAGMA auto_vacuum").fetchone())
    if full:
        database.outside_transaction(_full_vacuum)
        return "VACUUM (the whole file rewritten; incremental auto-vacuum on from now)"
    if mode and mode[0] == 2:
        pages = 0
        while step := database.outside_transaction(_incremental_step):
            pages += step
        return f"incremental vacuum: {pages} pages given back"
    return "freed pages kept for new rows (an older file: `toolrun ledger prune --vacuum`)"


def _incremental_step(raw) -> int:
    """One short write: up to `VACUUM_PAGES` free pages back; how many went."""
    free = raw.execute("PRAGMA freelist_count").fetchone()[0]
    if not free:
        return 0
    raw.execute(f"PRAGMA incremental_vacuum({VACUUM_PAGES})").fetchall()
    return max(0, free - raw.execute("PRAGMA freelist_count").fetchone()[0])


def _full_vacuum(raw) -> None:
    raw.execute("PRAGMA auto_vacuum = INCREMENTAL")
    raw.execute("VACUUM")
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def size(database: Database) -> int:
    """The database's size in bytes as the server counts it (SQLite: its pages,
    free ones included; PostgreSQL: the database on disk)."""
    if database.dialect == "postgresql":
        query = text("SELECT pg_database_size(current_database())")
        return int(
            database.transaction(lambda c: c.execute(query).scalar(), write=False, core=True)
        )
    count = database.outside_transaction(
        lambda raw: (
            raw.execute("PRAGMA page_count").fetchone()[0]
            * raw.execute("PRAGMA page_size").fetchone()[0]
        )
    )
    return int(count)
