"""Steps 1–4 of a call: lookup, validation, capability policy, permission gate.

The client runs them before planning a batch and the worker runs them again
right before the tool, against the same policy snapshot, so both see the same
answer from the same code. Every early end is a `Refused` carrying the result
the model gets and the ledger event that records why. A call whose decision is
`ask` is `Admitted`: the dispatcher asks, the worker checks the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from runtime.gate.decision import Decision, Effect
from runtime.gate.permissions import evaluate
from runtime.gate.policy import Policy
from runtime.ledger.store import EventKind
from runtime.registry import argument_limits
from runtime.registry.capabilities import CapabilitySpec, Registry
from runtime.registry.validation import Invalid, validate
from runtime.results import formatter as results
from runtime.types import Mode, Status, ToolCall, ToolResult

NAME_CHARS = 200  # what a result repeats of a tool name no tool has


@dataclass(frozen=True)
class Admitted:
    call: ToolCall
    spec: CapabilitySpec
    arguments: BaseModel
    decision: Decision


@dataclass(frozen=True)
class Refused:
    call: ToolCall
    spec: CapabilitySpec | None
    result: ToolResult
    event: EventKind
    decision: Decision | None = None


def admit(
    call: ToolCall,
    *,
    registry: Registry,
    mode: Mode,
    workspace: Path,
    policy: Policy,
    max_argument_bytes: int = argument_limits.DEFAULT_MAX_BYTES,
) -> Admitted | Refused:
    if call.kind != "function":
        return Refused(call, None, _unsupported(call), EventKind.lookup_failed)
    spec = registry.get(call.name)
    if spec is None:
        return Refused(call, None, _unknown(call, registry), EventKind.lookup_failed)
    # Before anything serializes them: a value JSON cannot carry ends this call only.
    fault = argument_limits.fault(call.arguments, max_bytes=max_argument_bytes)
    if fault is not None:
        result = results.failure(call.id, spec.name, Status.invalid_arguments,
                                 f"invalid arguments: {fault}")  # fmt: skip
        return Refused(call, spec, result, EventKind.invalid_arguments)
    arguments = validate(spec.input_model, call.arguments)
    if isinstance(arguments, Invalid):
        message = f"invalid arguments: {arguments.message}"
        result = results.failure(call.id, spec.name, Status.invalid_arguments, message)
        return Refused(call, spec, result, EventKind.invalid_arguments)
    if not spec.can_run(mode):
        message = f"disabled in {mode.value} mode: only read-only tools run there"
        result = results.failure(call.id, spec.name, Status.disabled, message)
        return Refused(call, spec, result, EventKind.disabled)
    decision = evaluate(spec, arguments, mode=mode, workspace=workspace, policy=policy)
    if decision.effect is Effect.deny:
        return refuse(call, spec, decision)
    return Admitted(call, spec, arguments, decision)


def refuse(call: ToolCall, spec: CapabilitySpec | None, decision: Decision) -> Refused:
    """A `denied` result that says why, for the model and the ledger."""
    name = spec.name if spec else call.name
    result = results.failure(call.id, name, Status.denied, f"denied: {decision.reason}")
    return Refused(call, spec, result, EventKind.decision, decision)


def _unsupported(call: ToolCall) -> ToolResult:
    name = _bounded(call.name)
    message = (
        f"{name!r} is a {call.kind} call, which toolrun does not run (it runs function "
        "tools only); it was not run. Use a function tool for this instead"
    )
    return results.failure(call.id, name, Status.unknown_tool, message,
                           kind="unsupported_call_kind")  # fmt: skip


def _bounded(name: object) -> str:
    name = name if isinstance(name, str) else repr(name)
    if len(name) > NAME_CHARS:  # a made-up name is model output: keep the result bounded
        name = name[:NAME_CHARS] + "…"
    return name


def _unknown(call: ToolCall, registry: Registry) -> ToolResult:
    name = _bounded(call.name)
    close = registry.closest(name)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    message = f"unknown tool {name!r}.{hint} Available tools: {', '.join(registry.names())}"
    return results.failure(call.id, name, Status.unknown_tool, message)
