"""The one place where a tool runs: check again, run with a timeout, catch,
format, redact, record.

Exceptions become results here and nowhere else. A tool's timeout is enforced
by running it in a watched thread, so it holds on every pool (Celery's threads
pool enforces no time limits); a tool still running past its timeout is left to
finish in the background and its outcome is not reported.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runtime import results, signing
from runtime.admission import Admitted, Refused, admit, refuse
from runtime.decision import Decision, Effect
from runtime.errors import LedgerUnavailable, ToolError
from runtime.ledger import EventKind, Ledger
from runtime.policy import Policy
from runtime.registry import Registry, ToolContext
from runtime.settings import Settings
from runtime.types import CallMessage, Risk, Status, ToolCall, ToolResult

log = logging.getLogger("toolrun.executor")


def execute(
    raw: dict[str, Any],
    *,
    registry: Registry,
    ledger: Ledger,
    settings: Settings,
    key: bytes,
    worker: str | None = None,
    attempt: int = 1,
) -> ToolResult | None:
    """Check a task message again and run its call; never raises for anything
    the tool, its input or the message does. None only for a message too
    malformed to name a call (there is nobody to answer)."""
    meta = {"worker": worker, "attempts": attempt}
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
            rule="signature",
            source="worker",
        )
        return _refuse(ledger, message, refuse(call, registry.get(call.name), decision), meta)
    policy = Policy.from_snapshot(message.policy)
    workspace = Path(message.workspace)
    admission = admit(call, registry=registry, mode=message.mode, workspace=workspace,
                      policy=policy)  # fmt: skip
    if isinstance(admission, Admitted) and admission.decision.effect is Effect.ask:
        if message.approved_by is None:
            decision = Decision.deny(
                f"{admission.decision.reason}, and no approval came with it",
                rule=admission.decision.rule,
                source="worker",
            )
            admission = refuse(call, admission.spec, decision)
    if isinstance(admission, Refused):
        return _refuse(ledger, message, admission, meta)
    try:
        ledger.mark_started(message.batch_id, call.id, worker=worker, attempt=attempt)
    except LedgerUnavailable as error:
        if admission.spec.risk is not Risk.read:
            note = "the audit ledger is unavailable, so this side effect was not run; retry later"
            log.error("ledger unavailable before %s: %s", call.id, error)
            return results.failure(call.id, call.name, Status.error, note, kind="ledger", **meta)
    result = _run(admission, message, settings, meta)
    _record(ledger, message, result, kind=EventKind.finished)
    return result


def _refuse(ledger: Ledger, message: CallMessage, refused: Refused, meta: dict) -> ToolResult:
    result = refused.result.model_copy(update=meta)
    fields = refused.decision.as_dict() if refused.decision else {}
    try:
        ledger.record_result(message.batch_id, result, kind=refused.event,
                             mode=message.mode.value, **fields)  # fmt: skip
    except LedgerUnavailable as error:
        log.error("ledger unavailable after refusing %s: %s", message.call_id, error)
    return result


def _run(admitted: Admitted, message: CallMessage, settings: Settings, meta: dict) -> ToolResult:
    spec = admitted.spec
    context = ToolContext(
        workspace=Path(message.workspace).resolve(),
        batch_id=message.batch_id,
        call_id=message.call_id,
        max_bytes=settings.result_max_bytes,
    )
    timeout = spec.timeout or settings.default_timeout
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = spec.execute(admitted.arguments, context)
        except BaseException as error:  # noqa: BLE001 - every failure becomes a result
            outcome["error"] = error

    started = time.perf_counter()
    # The tool's own log lines keep the batch and call ids of this task.
    runner = threading.Thread(target=contextvars.copy_context().run, args=(target,),
                              name=f"tool-{spec.name}", daemon=True)  # fmt: skip
    runner.start()
    runner.join(timeout)
    meta = {**meta, "duration_ms": round((time.perf_counter() - started) * 1000, 3)}
    call_id, name = message.call_id, spec.name
    if runner.is_alive():
        text = f"timed out after {timeout:g} s; try a smaller request"
        return results.failure(call_id, name, Status.timeout, text, **meta)
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, ToolError):
            return results.failure(call_id, name, error.status, str(error), kind=error.kind, **meta)
        text = f"{type(error).__name__}: {error}"
        return results.failure(call_id, name, Status.error, text, kind=type(error).__name__, **meta)
    try:
        return results.success(
            call_id, name, outcome.get("value"), max_bytes=settings.result_max_bytes, **meta
        )
    except Exception as error:  # noqa: BLE001 - a tool returned something unserializable
        text = f"the tool's output could not be formatted: {type(error).__name__}: {error}"
        return results.failure(call_id, name, Status.error, text, kind="format", **meta)


def _record(ledger: Ledger, message: CallMessage, result: ToolResult, *, kind: EventKind) -> None:
    try:
        ledger.record_result(message.batch_id, result, kind=kind)
    except LedgerUnavailable as error:
        log.error("ledger unavailable after %s finished: %s", message.call_id, error)
