"""Every terminal result that no tool produced, one named constructor and one
wording each: a call refused at admission, one that never ran (a failed step
before it, a cancel, the deadline), one abandoned while it ran, one the
infrastructure could not carry (ledger, broker, a lost worker), and the notice
of a call that waits for a human.

Each says what is known, so the model can tell "did not run" from "may have
run": side effects whose fate is unknown end `outcome_unknown` and say to
check before calling again (docs/architecture.md, "Semantics").
"""

from __future__ import annotations

from typing import Any

from runtime.results.formatter import failure
from runtime.types import Mode, Status, ToolCall, ToolResult

CHECK_FIRST = "check its effect before calling it again"

CANCELLED = "the batch was cancelled"


# Refused at admission.
def unknown_tool(call_id: str, name: str, *, close: list[str], available: list[str]) -> ToolResult:
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    message = f"unknown tool {name!r}.{hint} Available tools: {', '.join(available)}"
    return failure(call_id, name, Status.unknown_tool, message)


def unsupported(call_id: str, name: str, message: str) -> ToolResult:
    """A provider call of a kind toolrun does not run (a custom tool, a server tool)."""
    return failure(call_id, name, Status.unknown_tool, message, kind="unsupported_call_kind")


def invalid_arguments(call_id: str, tool: str, problem: str) -> ToolResult:
    return failure(call_id, tool, Status.invalid_arguments, f"invalid arguments: {problem}")


def disabled(call_id: str, tool: str, mode: Mode) -> ToolResult:
    text = f"disabled in {mode.value} mode: only read-only tools run there"
    return failure(call_id, tool, Status.disabled, text)


def denied(call_id: str, tool: str, reason: str, **meta: Any) -> ToolResult:
    return failure(call_id, tool, Status.denied, f"denied: {reason}", **meta)


def over_budget(call_id: str, tool: str, message: str, content: dict[str, Any]) -> ToolResult:
    """A budget this call would pass (runtime/flow/budgets.py, `Overrun`):
    which one, what is left, when it resets."""
    return failure(call_id, tool, Status.over_budget, message, kind="over_budget", content=content)


def limited(
    call_id: str, tool: str, status: Status, message: str, content: dict[str, Any]
) -> ToolResult:
    """A rate limit or concurrency cap that refused this call
    (runtime/flow/limits.py): which one, and `retry_after_s`."""
    return failure(call_id, tool, status, message, kind=status.value, content=content)


def awaiting_approval(call_id: str, tool: str, reason: str) -> ToolResult:
    """A notice, not an end: the call's final result follows."""
    return failure(call_id, tool, Status.awaiting_approval, f"awaiting approval: {reason}")


# Never ran.
def cancelled_before_start(
    call_id: str, tool: str, cause: str = CANCELLED, **meta: Any
) -> ToolResult:
    text = f"cancelled: {cause} before this call started; it did not run"
    return failure(call_id, tool, Status.cancelled, text, **meta)


def skipped_after(call_id: str, tool: str, failed: ToolCall) -> ToolResult:
    text = (
        f"skipped: call {failed.id} ({failed.name}) failed before it, so later "
        "side effects of this batch were not run"
    )
    return failure(call_id, tool, Status.skipped, text)


def skipped_at_deadline(call_id: str, tool: str) -> ToolResult:
    text = "skipped: the batch's deadline passed before this call's turn; it did not run"
    return failure(call_id, tool, Status.skipped, text)


def ledger_unavailable(call_id: str, tool: str, **meta: Any) -> ToolResult:
    text = "the audit ledger is unavailable, so this side effect was not run; retry later"
    return failure(call_id, tool, Status.error, text, kind="ledger", **meta)


def broker_unreachable(call_id: str, tool: str) -> ToolResult:
    text = "the broker (Redis) could not be reached before the deadline; the call was not run"
    return failure(call_id, tool, Status.error, text, kind="broker")


def chain_broken(call_id: str, tool: str) -> ToolResult:
    text = "the broker (Redis) could not take this step after the one before it; it did not run"
    return failure(call_id, tool, Status.error, text, kind="broker")


def unrecorded(call_id: str, tool: str, **meta: Any) -> ToolResult:
    text = "no client recorded a decision for this call in the ledger, so it was not run"
    return failure(call_id, tool, Status.denied, text, kind="unrecorded", **meta)


def given_up(call_id: str, tool: str, deliveries: int, **meta: Any) -> ToolResult:
    text = (
        f"the call was delivered {deliveries} times and its worker was lost each "
        "time (the tool may crash its process); it was given up on"
    )
    return failure(call_id, tool, Status.error, text, kind="worker_lost", **meta)


def dead_lettered(call_id: str, tool: str, limit: int, *, claimed: bool) -> ToolResult:
    """RabbitMQ gave the call's message up after `limit` returns (each worker
    that took it was lost) and dead-lettered it; the sweep ends the call so."""
    text = (
        f"the broker gave this call's message up after {limit} redeliveries (every worker "
        "that took it was lost; the tool may crash its process)"
    )
    if claimed:
        text = f"{text}; the tool may or may not have run: {CHECK_FIRST}"
        return failure(call_id, tool, Status.outcome_unknown, text, kind="dead_letter")
    return failure(call_id, tool, Status.error, text, kind="dead_letter")


# Ran, or may have: abandoned.
def timed_out(call_id: str, tool: str, seconds: float, **meta: Any) -> ToolResult:
    text = f"timed out after {seconds:g} s; try a smaller request"
    return failure(call_id, tool, Status.timeout, text, **meta)


def worker_lost(call_id: str, tool: str, **meta: Any) -> ToolResult:
    text = (
        f"the worker running this call was lost, so the tool may or may not have run; {CHECK_FIRST}"
    )
    return failure(call_id, tool, Status.outcome_unknown, text, kind="worker_lost", **meta)


def running_elsewhere(call_id: str, tool: str, **meta: Any) -> ToolResult:
    """What a second delivery of a claimed call answers while the claim's
    holder still runs it; nothing publishes it: the holder's end is the end."""
    text = "this call is running on another worker; this delivery of it did nothing"
    return failure(call_id, tool, Status.error, text, kind="duplicate_delivery", **meta)


def process_lost(call_id: str, tool: str, **meta: Any) -> ToolResult:
    """Its pool process died mid-call (killed by someone, or a crash), and every
    session it had started was killed before this end was written."""
    text = (
        "the process running this call was lost, so the tool may or may not have run; "
        f"{CHECK_FIRST}"
    )
    return failure(call_id, tool, Status.outcome_unknown, text, kind="worker_lost", **meta)


def cancelled_while_running(
    call_id: str, tool: str, *, read: bool, cause: str = CANCELLED
) -> ToolResult:
    if read:
        text = f"cancelled: {cause} while this read ran; it was abandoned"
        return failure(call_id, tool, Status.cancelled, text)
    text = f"{cause} while this call ran; the tool may or may not have finished, {CHECK_FIRST}"
    return failure(call_id, tool, Status.outcome_unknown, text)


def past_deadline(call_id: str, tool: str, *, read: bool) -> ToolResult:
    if read:
        text = "no result before the batch deadline; the read was abandoned"
        return failure(call_id, tool, Status.timeout, text)
    text = f"no result before the batch deadline; the tool may or may not have run, {CHECK_FIRST}"
    return failure(call_id, tool, Status.outcome_unknown, text)


def runtime_failed(call_id: str, tool: str, error: BaseException) -> ToolResult:
    text = f"the runtime failed before this call ended ({type(error).__name__})"
    return failure(call_id, tool, Status.outcome_unknown, text)


# What a batch picks from the above.
def abandoned(call: ToolCall, *, read: bool, cancelled: bool, cause: str = CANCELLED) -> ToolResult:
    """A call sent to a worker that did not answer before the deadline (or
    the grace after a cancel, whose `cause` the message names)."""
    if cancelled:
        return cancelled_while_running(call.id, call.name, read=read, cause=cause)
    return past_deadline(call.id, call.name, read=read)
