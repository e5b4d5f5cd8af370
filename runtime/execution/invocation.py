"""One invocation of a tool: with a timeout, transient failures retried, every
outcome turned into a `ToolResult`.

The timeout is enforced here, on every pool. In a prefork pool process the
tool runs on the main thread under an alarm (SIGALRM): Python code and
blocked system calls (a socket read, waiting for a child) are interrupted
with `CallTimedOut` and unwind, so when the result is handed over the tool
has stopped, and the next ordered step cannot overlap it (nor can a session
it started: the process ends any it recorded, `runtime.sessions`). C code that holds
the GIL cannot be interrupted: the worker kills the process at the hard
limit (`runtime.execution.time_limits`). Off the main thread (a threads pool) the tool
runs in a watched thread that gets `CallTimedOut` at the timeout; one blocked
in C runs on unreported, which is why effects run on prefork. A read past its
timeout ends `timeout`; a side effect `outcome_unknown`, since it may have
done part of its work, and so does one that a timeout of the tool's own
stopped (a `ToolError` whose status is `timeout`: the shell's, an MCP
server's). Read-only and idempotent tools may declare transient exceptions
(`@tool(transient=...)`); those are retried with exponential backoff and
jitter within the call's time, up to the spec's attempts and delay.

Each result says what its attempt cost (docs/architecture.md, "Transcripts"):
the queue wait, from the message's posting (`CallMessage.sent_at`, the
sender's clock) to the tool's start here, and the CPU time of the try that
ended it: on the main thread (prefork: the process runs this tool alone) the
whole process's, elsewhere the tool's thread's; children the tool waited for
(a shell's bash) included.
"""

from __future__ import annotations

import contextvars
import ctypes
import os
import resource
import signal
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import tenacity

from runtime import clock, sessions
from runtime.errors import CallTimedOut, ToolError
from runtime.execution import time_limits
from runtime.flow.budgets import Spending
from runtime.gate import rules
from runtime.gate.admission import Admitted
from runtime.gate.policy import Policy
from runtime.redaction import redactor_for
from runtime.registry.capabilities import CapabilitySpec, ToolContext, ToolOutput
from runtime.results import formatter as results
from runtime.sandbox import UNCONFINED, allowed, enabled_by
from runtime.settings import Settings
from runtime.types import CallMessage, Risk, Status, ToolResult, Usage


def invoke(
    admitted: Admitted,
    message: CallMessage,
    settings: Settings,
    *,
    delivery: int,
    worker: str | None,
    on_retry: Callable[[int, BaseException], None] = lambda attempt, error: None,
    quiet: Callable[[], AbstractContextManager] = nullcontext,
) -> ToolResult:
    """Run the tool; `quiet()` is held while it runs on this thread, so that no
    other thread of the process holds a ledger transaction meanwhile."""
    spec = admitted.spec
    redactor = redactor_for(settings.redaction_patterns)  # the worker's settings, not the process's
    context = ToolContext(
        # Symlinks followed, as `Path.resolve` does, without its pathlib round trips.
        workspace=Path(os.path.realpath(message.workspace)),
        batch_id=message.batch_id,
        call_id=message.call_id,
        max_bytes=settings.result_max_bytes,
        redactor=redactor,
        internal_hosts=tuple(message.policy.get("internal_hosts", ())),  # the org's, signed
        reading_denied=reading_denied(message),
        confined=settings.sandbox and enabled_by(message.policy),
        network=allowed(message.policy),  # the org's, signed
    )
    timeout = spec.timeout or settings.default_timeout
    outcome: dict[str, Any] = {"tries": 1, "cpu_total": 0.0}
    alarmed = _alarm_free()
    who = resource.RUSAGE_SELF if alarmed else THREAD

    def timed(arguments: Any, context: ToolContext) -> Any:
        """One try, its CPU time kept (the last try's is the result's)."""
        begin = _cpu_seconds(who)
        try:
            return spec.execute(arguments, context)
        finally:
            spent = _cpu_seconds(who) - begin
            outcome["cpu_ms"] = round(spent * 1000, 3)
            outcome["cpu_total"] += spent

    def target() -> None:
        try:
            run = _with_retries(spec, timed, outcome, on_retry)
            outcome["value"] = run(admitted.arguments, context)
        except BaseException as error:  # noqa: BLE001 - every failure becomes a result
            outcome["error"] = error

    queued = _queue_wait_ms(message.sent_at)
    started = time.perf_counter()
    if alarmed:
        with quiet():
            overran = _alarmed(target, timeout)
        sessions.end_own()  # a session the tool left (a stopped MCP server's) dies with its call
    else:  # a threads pool: the tool's thread is not this one, and others run tools too
        overran = _watched(target, timeout, spec.name)
    meta = {
        "worker": worker,
        "attempts": delivery + outcome["tries"] - 1,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        "queue_wait_ms": queued,
        "cpu_ms": outcome.get("cpu_ms"),  # None: a thread abandoned at its timeout runs on
    }
    meta["usage"] = _usage(meta, outcome, spec.name, message, context.spent)
    result = _result(spec, message.call_id, timeout, overran, outcome, settings, redactor, meta)
    if context.unconfined:  # the ledger's row and the transcript say so (docs: "The sandbox")
        return result.model_copy(update={"summary": f"[{UNCONFINED}] {result.summary}"})
    return result


def _result(
    spec: CapabilitySpec,
    call_id: str,
    timeout: float,
    overran: bool,
    outcome: dict[str, Any],
    settings: Settings,
    redactor: Any,
    meta: dict[str, Any],
) -> ToolResult:
    name = spec.name
    if overran or isinstance(outcome.get("error"), CallTimedOut):
        return time_limits.overran(call_id, name, timeout, read=spec.risk is Risk.read, **meta)
    if "error" in outcome:
        error, meta["max_bytes"] = outcome["error"], settings.result_max_bytes
        meta["redactor"] = redactor  # an exception's text is the tool's: it may hold a secret
        if isinstance(error, ToolError):
            if error.status is Status.timeout and spec.risk is not Risk.read:
                return time_limits.cut_off(call_id, name, str(error), **meta)
            return results.failure(call_id, name, error.status, str(error), kind=error.kind, **meta)
        text = f"{type(error).__name__}: {error}"
        return results.failure(call_id, name, Status.error, text, kind=type(error).__name__, **meta)
    try:
        return results.success(
            call_id,
            name,
            outcome.get("value"),
            max_bytes=settings.result_max_bytes,
            max_media_bytes=settings.result_max_media_bytes,
            redactor=redactor,
            **meta,
        )
    except Exception as error:  # noqa: BLE001 - a tool returned something unserializable
        text = f"the tool's output could not be formatted: {type(error).__name__}: {error}"
        return results.failure(
            call_id, name, Status.error, text, kind="format", redactor=redactor, **meta
        )


def _usage(
    meta: dict[str, Any],
    outcome: dict[str, Any],
    tool: str,
    message: CallMessage,
    reported: dict[str, Any],
) -> Usage:
    """What the call cost (docs/architecture.md, "Usage and budgets"): every
    try's CPU (None once a thread was abandoned: it runs on), the wall time on
    the worker, the tool's own report, and its price by the batch's table."""
    spending = Spending.from_snapshot(message.policy.get("usage"))
    price, wall = spending.price(tool), meta["duration_ms"]
    value = outcome.get("value")
    abandoned = "cpu_ms" not in outcome
    return Usage(
        wall_ms=wall,
        cpu_ms=None if abandoned else round(outcome["cpu_total"] * 1000, 3),
        queue_ms=meta["queue_wait_ms"],
        approval_ms=message.approval_ms,
        reported=_reported(reported, value),
        price_per_call=price.per_call if price else None,
        price_per_second=price.per_second if price else None,
        cost=spending.cost(tool, wall / 1000),
    )


def _reported(during: dict[str, Any], value: Any) -> dict[str, float]:
    """A tool's own report of what it spent (`ctx.spend`, then its output's
    `spent`), summed by name: its numbers only."""
    found: dict[str, float] = {}
    for spent in (during, value.spent if isinstance(value, ToolOutput) else {}):
        for name, amount in spent.items() if isinstance(spent, dict) else ():
            if isinstance(amount, int | float) and not isinstance(amount, bool):
                found[str(name)] = found.get(str(name), 0.0) + float(amount)
    return found


# A thread's own usage (Linux); elsewhere the process's.
THREAD = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


def _cpu_seconds(who: int) -> float:
    """User and system CPU seconds of `who`, and of the children waited for.
    The children's count is the process's: in a threads pool it holds those
    of tools running alongside that ended meanwhile."""
    own, children = resource.getrusage(who), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def reading_denied(message: CallMessage) -> Callable[[Path], str | None]:
    """What a search asks of each file it opens: the text of the batch's deny
    rule for a reading tool that covers it (`runtime.gate.rules.reading_denials`,
    from the signed policy snapshot), or None."""
    workspace = Path(os.path.realpath(message.workspace))
    found: list[tuple[rules.Rule, ...]] = []  # parsed at the first look, once

    def denied(path: Path) -> str | None:
        if not found:
            snapshot = message.policy
            found.append(
                rules.reading_denials(Policy.from_snapshot(snapshot).rules) if snapshot else ()
            )
        rule = rules.denying_reading(found[0], str(path), workspace)
        return rule.text if rule is not None else None

    return denied


def _queue_wait_ms(sent_at: float | None) -> float | None:
    """Milliseconds since the message was posted; never negative (the sender's
    clock may be ahead of this one); None if the sender did not say."""
    if sent_at is None:
        return None
    return round(max(0.0, clock.now() - sent_at) * 1000, 3)


def _alarm_free() -> bool:
    """Whether the alarm can time the tool: the main thread (a prefork pool
    process), and no one else's timer armed (a test runner's own timeout)."""
    main = threading.current_thread() is threading.main_thread()
    return main and signal.getitimer(signal.ITIMER_REAL)[0] == 0


def _ring(signum: int, frame: object) -> None:
    raise CallTimedOut()


def _alarmed(target: Callable[[], None], timeout: float) -> bool:
    """Run `target` here, interrupted by an alarm at `timeout`; whether it rang."""
    previous = signal.signal(signal.SIGALRM, _ring)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            target()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except CallTimedOut:  # rang between the tool's end and the disarming
        return True
    finally:
        signal.signal(signal.SIGALRM, previous)
    return False


def _watched(target: Callable[[], None], timeout: float, name: str) -> bool:
    """Run `target` in a thread, abandoned (and interrupted) at `timeout`;
    whether it overran."""
    # The tool's own log lines keep the batch and call ids of this task.
    runner = threading.Thread(
        target=contextvars.copy_context().run, args=(target,), name=f"tool-{name}", daemon=True
    )
    runner.start()
    runner.join(timeout)
    if runner.is_alive():
        _interrupt(runner)
        return True
    return False


def _interrupt(runner: threading.Thread) -> None:
    """Raise `CallTimedOut` in the tool's thread, which no pool would ever stop:
    a spinning tool would otherwise burn a core of the worker until it exits."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(runner.ident), ctypes.py_object(CallTimedOut)
    )


def _with_retries(spec: CapabilitySpec, execute: Callable, outcome: dict, on_retry) -> Callable:
    """`execute` (the tool), retried on its transient exceptions when running
    it twice is safe (read-only or idempotent); as it is otherwise."""
    if not spec.transient or not (spec.risk is Risk.read or spec.idempotent):
        return execute

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
    )(execute)
