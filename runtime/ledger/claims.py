"""The claim of a non-idempotent side effect: one atomic ledger transition
keyed by batch id and call id, made before the tool runs, which is what makes
such calls at-most-once.

A redelivered message (a lost worker, a visibility timeout, a resend) that
finds the call finished gets the recorded result; one that finds it claimed
does nothing: the claim's holder ends it, or, once the holder stops renewing
its lease, the sweep ends it `outcome_unknown` (docs/architecture.md, "Leases"). A
call of a batch whose cancel is recorded is never claimed: the cancel is read
in the claim's own transaction (the batch row locked for share on PostgreSQL,
so a cancel being written waits for the claim or is seen by it), so no side
effect starts after the cancel the ledger holds.
Reads and idempotent calls claim nothing: they may run again (the executor
counts their deliveries in Redis and gives up after `max_deliveries`).

A statement on a connection; the executor claims through `Ledger.claim`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from sqlalchemy import Connection, bindparam, case, func, insert, select, update

from runtime.ledger.chain import event_hash, stamped
from runtime.ledger.prepared import Prepared
from runtime.ledger.rows import BATCHES, CALLS, EVENTS, event_fields
from runtime.ledger.tables import EventKind, utc_now
from runtime.redaction import Redactor
from runtime.types import Status

OPEN = {"pending", "running", Status.awaiting_approval.value}


class Start(StrEnum):
    run = "run"  # go ahead: this delivery holds the call
    finished = "finished"  # already ended; answer with the recorded result
    taken = "taken"  # claimed by another delivery, not ended yet
    unrecorded = "unrecorded"  # no call row: no client recorded a decision for it
    cancelled = "cancelled"  # the batch's cancel was recorded first: it must not start


class Found(NamedTuple):
    """What a claim reads of the call's row, as it was found."""

    status: str
    attempts: int
    worker: str | None
    summary: str | None
    error_kind: str | None
    error_message: str | None


@dataclass(frozen=True)
class Begun:
    start: Start
    delivery: int
    row: Found | None  # the call's row as it was found


def claim(
    connection: Connection, batch_id: str, call_id: str, *, worker: str | None, redactor: Redactor
) -> Begun:
    """Claim a call, writing its started row with the claim."""
    key = {"batch": batch_id, "call": call_id}
    row = CALL.first(connection, key)
    if row is None:
        return Begun(Start.unrecorded, 1, None)
    call = Found(*row)
    if call.status not in OPEN:
        return Begun(Start.finished, call.attempts, call)
    if call.status != "pending":
        return Begun(Start.taken, call.attempts, call)
    if CANCELLED.first(connection, key) == (1,):
        return Begun(Start.cancelled, call.attempts, call)
    now, delivery = utc_now(), call.attempts + 1
    TAKE.execute(connection, key | {"worker": worker, "attempts": delivery, "now": now})
    started = event_fields(
        batch_id,
        call_id,
        EventKind.started,
        at=now,
        worker=worker,
        attempt=delivery,
        redactor=redactor,
    )
    INSERT_EVENTS.execute(connection, stamped(connection, [started], event_hash)[0])
    return Begun(Start.run, delivery, call)


# The claim's statements, built once (built per claim, they cost a chain's step
# more CPU than running them) and run on the driver's cursor
# (`runtime.ledger.prepared`; docs/architecture.md, "Round trips and memory").
# Whether the batch is cancelled is read as 1 or 0, which needs no converting
# (the time would); its row is locked for share either way.
_THE_CALL = (CALLS.c.batch_id == bindparam("batch")) & (CALLS.c.call_id == bindparam("call"))
CALL = Prepared(
    select(*(CALLS.c[name] for name in Found._fields)).where(_THE_CALL).with_for_update(),
    rows=True,
)
CANCELLED = Prepared(
    select(case((BATCHES.c.cancelled_at.is_(None), 0), else_=1))
    .where(BATCHES.c.id == bindparam("batch"))
    .with_for_update(read=True),
    rows=True,
)
TAKE = Prepared(
    update(CALLS)
    .where(_THE_CALL)
    .values(
        status="running",
        worker=bindparam("worker", type_=CALLS.c.worker.type),
        attempts=bindparam("attempts", type_=CALLS.c.attempts.type),
        started_at=func.coalesce(
            CALLS.c.started_at, bindparam("now", type_=CALLS.c.started_at.type)
        ),
    )
)
INSERT_EVENTS = Prepared(insert(EVENTS))
