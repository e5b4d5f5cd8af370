"""One invocation of a tool: in a watched thread with a timeout, transient
failures retried, every outcome turned into a `ToolResult`.

The timeout is enforced here, not by Celery, so it holds on every pool (the
threads pool enforces no time limits): the call ends `timeout` on time even if
the tool ignores it. The tool's thread then gets `CallTimedOut`: a tool
running Python code stops there; one blocked in C stops when that call
returns; either way its outcome goes unreported. Read-only and idempotent
tools may declare transient exceptions (`@tool(transient=...)`); those are
retried with exponential backoff and jitter within the call's time, up to the
spec's attempts and delay.
"""

from __future__ import annotations

import contextvars
import ctypes
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tenacity

from runtime import results
from runtime.admission import Admitted
from runtime.errors import CallTimedOut, ToolError
from runtime.registry import CapabilitySpec, ToolContext
from runtime.settings import Settings
from runtime.types import CallMessage, Risk, Status, ToolResult


def invoke(
    admitted: Admitted,
    message: CallMessage,
    settings: Settings,
    *,
    delivery: int,
    worker: str | None,
    on_retry: Callable[[int, BaseException], None] = lambda attempt, error: None,
) -> ToolResult:
    spec = admitted.spec
    context = ToolContext(
        workspace=Path(message.workspace).resolve(),
        batch_id=message.batch_id,
        call_id=message.call_id,
        max_bytes=settings.result_max_bytes,
    )
    timeout = spec.timeout or settings.default_timeout
    outcome: dict[str, Any] = {"tries": 1}

    def target() -> None:
        try:
            outcome["value"] = _with_retries(spec, outcome, on_retry)(admitted.arguments, context)
        except BaseException as error:  # noqa: BLE001 - every failure becomes a result
            outcome["error"] = error

    started = time.perf_counter()
    # The tool's own log lines keep the batch and call ids of this task.
    runner = threading.Thread(target=contextvars.copy_context().run, args=(target,),
                              name=f"tool-{spec.name}", daemon=True)  # fmt: skip
    runner.start()
    runner.join(timeout)
    meta = {
        "worker": worker,
        "attempts": delivery + outcome["tries"] - 1,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
    }
    call_id, name = message.call_id, spec.name
    if runner.is_alive():
        _interrupt(runner)
        text = f"timed out after {timeout:g} s; try a smaller request"
        return results.failure(call_id, name, Status.timeout, text, **meta)
    if "error" in outcome:
        error, meta["max_bytes"] = outcome["error"], settings.result_max_bytes
        if isinstance(error, ToolError):
            return results.failure(call_id, name, error.status, str(error), kind=error.kind, **meta)
        text = f"{type(error).__name__}: {error}"
        return results.failure(call_id, name, Status.error, text, kind=type(error).__name__, **meta)
    try:
        return results.success(
            call_id, name, outcome.get("value"), max_bytes=settings.result_max_bytes,
            max_media_bytes=settings.result_max_media_bytes, **meta,
        )  # fmt: skip
    except Exception as error:  # noqa: BLE001 - a tool returned something unserializable
        text = f"the tool's output could not be formatted: {type(error).__name__}: {error}"
        return results.failure(call_id, name, Status.error, text, kind="format", **meta)


def _interrupt(runner: threading.Thread) -> None:
    """Raise `CallTimedOut` in the tool's thread, which no pool would ever stop:
    a spinning tool would otherwise burn a core of the worker until it exits."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(runner.ident), ctypes.py_object(CallTimedOut)
    )


def _with_retries(spec: CapabilitySpec, outcome: dict, on_retry) -> Callable:
    """The tool, retried on its transient exceptions when running it twice is
    safe (read-only or idempotent); as it is otherwise."""
    if not spec.transient or not (spec.risk is Risk.read or spec.idempotent):
        return spec.execute

    def before_sleep(state: tenacity.RetryCallState) -> None:
        outcome["tries"] = state.attempt_number + 1
        on_retry(state.attempt_number, state.outcome.exception())

    return tenacity.retry(
        retry=tenacity.retry_if_exception_type(spec.transient),
        stop=tenacity.stop_after_attempt(spec.retry_attempts)
        | tenacity.stop_after_delay(spec.retry_max_delay),
        wait=tenacity.wait_random_exponential(multiplier=0.05, max=spec.retry_max_delay),
        before_sleep=before_sleep,
        reraise=True,
    )(spec.execute)
