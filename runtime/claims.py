"""The start of a delivery, as one atomic ledger transition keyed by batch id
and call id: what makes non-idempotent side effects at-most-once.

A worker claims a call before it runs the tool. A redelivered message (a lost
worker, a visibility timeout) that finds the call finished gets the recorded
result; one that finds a non-idempotent call claimed by a delivery that never
finished gets `outcome_unknown` and does not run it. Reads and idempotent calls
run again, up to `max_deliveries`, so a tool that crashes its worker every time
is given up on instead of looping.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlmodel import Session

from runtime.ledger import CallRow, EventKind, EventRow, Ledger
from runtime.ledger_tables import utc_now
from runtime.types import Status

OPEN = {"pending", "running", Status.awaiting_approval.value}


class Start(StrEnum):
    run = "run"  # go ahead: this delivery holds the call
    finished = "finished"  # already ended; answer with the recorded result
    taken = "taken"  # a non-idempotent call another delivery claimed and never ended
    exhausted = "exhausted"  # delivered max_deliveries times without ending
    unrecorded = "unrecorded"  # no call row: no client recorded a decision for it


@dataclass(frozen=True)
class Begun:
    start: Start
    delivery: int
    row: CallRow | None


def begin(
    ledger: Ledger,
    batch_id: str,
    call_id: str,
    *,
    worker: str | None,
    exclusive: bool,
    max_deliveries: int,
) -> Begun:
    """Claim (`exclusive`) or start a call, writing the started row with it."""

    def work(session: Session) -> Begun:
        key = {"batch_id": batch_id, "call_id": call_id}
        call = session.get(CallRow, key, with_for_update=True)
        now = utc_now()

        def started(attempt: int) -> EventRow:
            return EventRow(batch_id=batch_id, call_id=call_id, kind=EventKind.started.value,
                            at=now, worker=worker, attempt=attempt)  # fmt: skip

        if call is None:
            # A read may run before its client's buffered rows land: record its start.
            if not exclusive:
                session.add(started(1))
            return Begun(Start.unrecorded, 1, None)
        if call.status not in OPEN:
            return Begun(Start.finished, call.attempts, call)
        if exclusive and call.status != "pending":
            return Begun(Start.taken, call.attempts, call)
        delivery = call.attempts + 1
        if delivery > max_deliveries:
            return Begun(Start.exhausted, call.attempts, call)
        call.status, call.worker, call.attempts = "running", worker, delivery
        call.started_at = call.started_at or now
        session.add(started(delivery))
        return Begun(Start.run, delivery, call)

    return ledger.transaction(work)
