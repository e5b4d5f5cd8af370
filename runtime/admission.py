"""Steps 1–4 of a call: lookup, validation, capability policy, permission gate.

The client runs them before planning a batch and the worker runs them again
right before the tool, so both see the same answer from the same code. Every
early end is a `Refused` carrying the result the model gets and the ledger
event that records why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from runtime import results
from runtime.ledger import EventKind
from runtime.permissions import Decision, Effect, evaluate
from runtime.registry import CapabilitySpec, Registry
from runtime.types import Mode, Status, ToolCall, ToolResult
from runtime.validation import Invalid, validate


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


def admit(call: ToolCall, *, registry: Registry, mode: Mode, workspace: Path) -> Admitted | Refused:
    spec = registry.get(call.name)
    if spec is None:
        return Refused(call, None, _unknown(call, registry), EventKind.lookup_failed)
    arguments = validate(spec.input_model, call.arguments)
    if isinstance(arguments, Invalid):
        message = f"invalid arguments: {arguments.message}"
        result = results.failure(call.id, spec.name, Status.invalid_arguments, message)
        return Refused(call, spec, result, EventKind.invalid_arguments)
    if not spec.can_run(mode):
        message = f"disabled in {mode.value} mode: only read-only tools run there"
        result = results.failure(call.id, spec.name, Status.disabled, message)
        return Refused(call, spec, result, EventKind.disabled)
    decision = evaluate(spec, arguments, mode=mode, workspace=workspace)
    if decision.effect is Effect.deny:
        result = results.failure(call.id, spec.name, Status.denied, f"denied: {decision.reason}")
        return Refused(call, spec, result, EventKind.decision, decision)
    if decision.effect is Effect.ask:
        # Nobody can answer yet: approvals come with the full gate. Until then a
        # call that needs asking is refused, and says how to let it run.
        message = (
            f"denied: {decision.reason}, and this batch has no approver; "
            "the user can allow it by running the batch in accept_edits or auto mode"
        )
        result = results.failure(call.id, spec.name, Status.denied, message)
        return Refused(call, spec, result, EventKind.decision, decision)
    return Admitted(call, spec, arguments, decision)


def _unknown(call: ToolCall, registry: Registry) -> ToolResult:
    name = call.name if isinstance(call.name, str) else repr(call.name)
    close = registry.closest(name)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    message = f"unknown tool {name!r}.{hint} Available tools: {', '.join(registry.names())}"
    return results.failure(call.id, name, Status.unknown_tool, message)
