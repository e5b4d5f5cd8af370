"""A delivery's outcome: its result and whether its end is the one the ledger
holds, with the ways the executor records it (now, or from the buffer once
the ledger is back: docs/architecture.md, "One end per call")."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import NamedTuple

from runtime.errors import StateUnavailable
from runtime.gate.admission import Refused
from runtime.ledger.claims import Begun, Start
from runtime.ledger.ends import CallEnd
from runtime.ledger.store import EventKind, Ledger
from runtime.results import endings
from runtime.results import formatter as results
from runtime.transport.base import Leases
from runtime.types import CallMessage, Status, ToolResult


class Outcome(NamedTuple):
    """A call's result, and whether this delivery's end is the one the ledger
    holds: True (it ended the call), False (the call had ended already: its end
    was published by whoever ended it), None (not known yet: the row waits in
    the buffer while the ledger is down). `deferred`: a claimed call that ran
    under `defer`, its end not written yet (`runtime.execution.handover`).
    `unrecorded`: its end was written before its batch's record (a batch sent
    first: docs/architecture.md, "Sent before recorded"), so no worker can end
    the batch yet; the record's own transaction does. `closed`: its end's
    transaction marked the batch ended (`CallEnd.close`)."""

    result: ToolResult
    ended: bool | None
    deferred: bool = False
    unrecorded: bool = False
    closed: bool = False


Recall = Callable[[str, str], ToolResult | None]  # (batch id, call id) -> published result


Recall = Callable[[str, str], ToolResult | None]  # (batch id, call id) -> published result


def early_end(
    begun: Begun, message: CallMessage, tool: str, worker: str | None, recall: Recall
) -> ToolResult | None:
    """The result of a delivery that must not run the tool, or None to run it."""
    meta = {"worker": worker, "attempts": begun.delivery}
    call_id = message.call_id
    if begun.start is Start.run:
        return None
    if begun.start is Start.finished:
        return recall(message.batch_id, call_id) or from_row(begun, message, tool)
    return endings.unrecorded(call_id, tool, **meta)


def from_row(begun: Begun, message: CallMessage, tool: str) -> ToolResult:
    row = begun.row
    text = row.error_message or row.summary or f"{tool} had already finished: {row.status}"
    status = Status(row.status)
    if status is Status.ok:
        return results.success(
            message.call_id, tool, text, max_bytes=1024, worker=row.worker, attempts=row.attempts
        )
    return results.failure(
        message.call_id,
        tool,
        status,
        text,
        kind=row.error_kind,
        worker=row.worker,
        attempts=row.attempts,
    )


def refusal(ledger: Ledger, message: CallMessage, refused: Refused, meta: dict) -> Outcome:
    result = refused.result.model_copy(update=meta)
    fields = refused.decision.as_dict() if refused.decision else {}
    mode = message.mode.value
    return Outcome(
        result,
        eventually(
            ledger,
            lambda: ledger.record_result(
                message.batch_id, result, kind=refused.event, mode=mode, **fields
            ),
        ),
    )


def published_first(
    ledger: Ledger, state: Leases | None, message: CallMessage, published: ToolResult
) -> Outcome:
    """A call this delivery claimed, whose end was published before: another
    delivery of it failed closed while the ledger was away, its row still
    waiting, and its caller was told it did not run. It does not run now; the
    ledger takes the end the caller got (docs/architecture.md, "One end per
    call"), and the lease just taken goes."""
    ledger.eventually(lambda: ledger.record_result(message.batch_id, published))
    if state is not None:
        with contextlib.suppress(StateUnavailable):  # it lapses; the call has its end
            state.release(message.batch_id, message.call_id)
    return Outcome(published, False)


def later(ledger: Ledger, message: CallMessage, result: ToolResult) -> Outcome:
    """The end row once the ledger is back (it has just failed)."""
    ledger.later(lambda: ledger.record_result(message.batch_id, result))
    return Outcome(result, None)


def record(
    ledger: Ledger, message: CallMessage, result: ToolResult, kind: EventKind = EventKind.finished
) -> Outcome:
    """The end row: now, or from the buffer once the ledger is back."""
    end = CallEnd(message.batch_id, result, kind=kind, redactor=ledger.redactor)
    return ending(ledger, message, result, end)


def ending(ledger: Ledger, message: CallMessage, result: ToolResult, end: CallEnd) -> Outcome:
    """`end` (`result`'s rows) written now, or from the buffer once the ledger
    is back. The only call of the batch's last stage closes the batch with its
    end if every call has one (`CallEnd.close`), but only with a write made
    now: the worker then drops the plan's copy with the publish. One replayed
    from the buffer closes nothing; the sweep closes that batch, and drops its
    copy, as before (docs/architecture.md, "Round trips and memory")."""
    now = [message.last_stage and message.stage_size == 1]

    def write() -> bool:
        end.close, now[0] = now[0], False
        return ledger.record_end(end)

    ended = eventually(ledger, write)
    closed = ended is True and end.closed
    return Outcome(result, ended, unrecorded=end.call_recorded is False, closed=closed)


def eventually(ledger: Ledger, write: Callable[[], bool]) -> bool | None:
    """Whether `write` ended the call; None if it waits in the buffer."""
    ended: list[bool] = []
    ledger.eventually(lambda: ended.append(write()))
    return ended[0] if ended else None
