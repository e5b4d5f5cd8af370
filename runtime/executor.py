"""The one place where a tool runs: check the message again, claim the call,
invoke the tool, record the end.

Exceptions become results here (and in `invocation`, which this calls) and
nowhere else. The worker trusts nothing it receives: the message must carry a
valid signature, the call is admitted again under the policy it was submitted
with, a call that needs asking runs only with its approval, and a
non-idempotent side effect runs only if this delivery claims it in the ledger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runtime import results, signing
from runtime.admission import Admitted, Refused, admit, refuse
from runtime.channel import Board
from runtime.claims import Begun, Start, begin
from runtime.decision import Decision, Effect
from runtime.errors import LedgerUnavailable
from runtime.invocation import invoke
from runtime.ledger import EventKind, Ledger
from runtime.policy import Policy
from runtime.registry import Registry
from runtime.settings import Settings
from runtime.types import CallMessage, Risk, Status, ToolCall, ToolResult

log = logging.getLogger("toolrun.executor")
Recall = Callable[[str, str], ToolResult | None]  # (batch id, call id) -> published result


def execute(
    raw: dict[str, Any],
    *,
    registry: Registry,
    ledger: Ledger,
    settings: Settings,
    key: bytes,
    worker: str | None = None,
    board: Board | None = None,
) -> ToolResult | None:
    """Check a task message again and run its call; never raises for anything
    the tool, its input or the message does. None only for a message too
    malformed to name a call (there is nobody to answer). `board` says whether
    the batch was cancelled and finds results already published."""
    meta = {"worker": worker, "attempts": 1}
    try:
        message = CallMessage.model_validate(raw)
    except ValidationError:
        log.error("malformed task message refused")
        return None
    call = ToolCall(id=message.call_id, name=message.tool, arguments=message.arguments)
    if not signing.verify(raw, key):
        # Not sent by a client holding the key, or altered on the way: never run.
        decision = Decision.deny(
            "the task message is unsigned or its signature does not match; it was not run",
            rule="signature", source="worker")  # fmt: skip
        return _refuse(ledger, message, refuse(call, registry.get(call.name), decision), meta)
    admission = admit(call, registry=registry, mode=message.mode,
                      workspace=Path(message.workspace),
                      policy=Policy.from_snapshot(message.policy))  # fmt: skip
    if isinstance(admission, Admitted) and admission.decision.effect is Effect.ask:
        if message.approved_by is None:
            decision = Decision.deny(f"{admission.decision.reason}, and no approval came with it",
                                     rule=admission.decision.rule, source="worker")  # fmt: skip
            admission = refuse(call, admission.spec, decision)
    if isinstance(admission, Refused):
        return _refuse(ledger, message, admission, meta)
    spec = admission.spec
    if board is not None and board.cancelled(message.batch_id):
        text = "cancelled: the batch was cancelled before this call started; it did not run"
        cancelled = results.failure(call.id, spec.name, Status.cancelled, text, **meta)
        return _record(ledger, message, cancelled, EventKind.cancelled)
    exclusive = spec.risk is not Risk.read and not spec.idempotent
    try:
        begun = begin(ledger, message.batch_id, call.id, worker=worker, exclusive=exclusive,
                      max_deliveries=settings.max_deliveries)  # fmt: skip
    except LedgerUnavailable as error:
        if exclusive:  # fail closed; the end row of a call that did not run may wait
            log.error("ledger unavailable before %s: %s", call.id, error)
            note = "the audit ledger is unavailable, so this side effect was not run; retry later"
            refused = results.failure(call.id, call.name, Status.error, note, kind="ledger", **meta)
            return _later(ledger, message, refused)
        begun = Begun(Start.run, 1, None)  # reads go on; their rows wait in the buffer
        ledger.later(lambda: ledger.mark_started(message.batch_id, call.id, worker=worker,
                                                 attempt=1))  # fmt: skip
    recall = board.recall if board is not None else lambda batch_id, call_id: None
    early = _early_end(begun, message, spec.name, exclusive, worker, recall)
    if early is not None:
        return early if begun.start is Start.finished else _record(ledger, message, early)

    def retried(attempt: int, error: BaseException) -> None:
        ledger.eventually(lambda: ledger.record_event(
            message.batch_id, call.id, EventKind.retried, worker=worker, attempt=attempt,
            reason=f"{type(error).__name__}: {error}"))  # fmt: skip

    result = invoke(admission, message, settings, delivery=begun.delivery, worker=worker,
                    on_retry=retried)  # fmt: skip
    return _record(ledger, message, result)


def _early_end(begun: Begun, message: CallMessage, tool: str, exclusive: bool,
               worker: str | None, recall: Recall) -> ToolResult | None:  # fmt: skip
    """The result of a delivery that must not run the tool, or None to run it."""
    meta = {"worker": worker, "attempts": begun.delivery}
    call_id = message.call_id
    if begun.start is Start.run or (begun.start is Start.unrecorded and not exclusive):
        return None
    if begun.start is Start.finished:
        return recall(message.batch_id, call_id) or _from_row(begun, message, tool)
    if begun.start is Start.taken:
        text = ("the worker running this call was lost, so the tool may or may not have run; "
                "check its effect before calling it again")  # fmt: skip
        return results.failure(call_id, tool, Status.outcome_unknown, text, kind="worker_lost",
                               **meta)  # fmt: skip
    if begun.start is Start.exhausted:
        text = (f"the call was delivered {begun.delivery} times and its worker was lost each "
                "time (the tool may crash its process); it was given up on")  # fmt: skip
        return results.failure(call_id, tool, Status.error, text, kind="worker_lost", **meta)
    text = "no client recorded a decision for this call in the ledger, so it was not run"
    return results.failure(call_id, tool, Status.denied, text, kind="unrecorded", **meta)


def _from_row(begun: Begun, message: CallMessage, tool: str) -> ToolResult:
    row = begun.row
    text = row.error_message or row.summary or f"{tool} had already finished: {row.status}"
    status = Status(row.status)
    if status is Status.ok:
        return results.success(message.call_id, tool, text, max_bytes=1024, worker=row.worker,
                               attempts=row.attempts)  # fmt: skip
    return results.failure(message.call_id, tool, status, text, kind=row.error_kind,
                           worker=row.worker, attempts=row.attempts)  # fmt: skip


def _refuse(ledger: Ledger, message: CallMessage, refused: Refused, meta: dict) -> ToolResult:
    result = refused.result.model_copy(update=meta)
    fields = refused.decision.as_dict() if refused.decision else {}
    mode = message.mode.value
    ledger.eventually(
        lambda: ledger.record_result(
            message.batch_id, result, kind=refused.event, mode=mode, **fields
        )  # fmt: skip
    )
    return result


def _later(ledger: Ledger, message: CallMessage, result: ToolResult) -> ToolResult:
    """The end row once the ledger is back (it has just failed)."""
    ledger.later(lambda: ledger.record_result(message.batch_id, result))
    return result


def _record(ledger: Ledger, message: CallMessage, result: ToolResult,
            kind: EventKind = EventKind.finished) -> ToolResult:  # fmt: skip
    """The end row: now, or from the buffer once the ledger is back."""
    ledger.eventually(lambda: ledger.record_result(message.batch_id, result, kind=kind))
    return result
