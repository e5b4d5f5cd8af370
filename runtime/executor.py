"""The one place where a tool runs: check again, run with a timeout, catch,
format, redact, record.

Exceptions become results here and nowhere else. A tool's timeout is enforced
by running it in a watched thread, so it holds on every pool (Celery's threads
pool enforces no time limits); a tool still running past its timeout is left to
finish in the background and its outcome is not reported.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from runtime import results
from runtime.admission import Admitted, Refused, admit
from runtime.errors import LedgerUnavailable, ToolError
from runtime.ledger import EventKind, Ledger
from runtime.registry import Registry, ToolContext
from runtime.settings import Settings
from runtime.types import CallMessage, Risk, Status, ToolCall, ToolResult

log = logging.getLogger("toolrun.executor")


def execute(
    message: CallMessage,
    *,
    registry: Registry,
    ledger: Ledger,
    settings: Settings,
    worker: str | None = None,
    attempt: int = 1,
) -> ToolResult:
    """Run one admitted call and return its result; never raises for anything
    the tool or its input does."""
    call = ToolCall(id=message.call_id, name=message.tool, arguments=message.arguments)
    workspace = Path(message.workspace)
    admission = admit(call, registry=registry, mode=message.mode, workspace=workspace)
    meta = {"worker": worker, "attempts": attempt}
    if isinstance(admission, Refused):
        result = admission.result.model_copy(update=meta)
        _record(ledger, message, result, kind=admission.event)
        return result
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
    runner = threading.Thread(target=target, name=f"tool-{spec.name}", daemon=True)
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
