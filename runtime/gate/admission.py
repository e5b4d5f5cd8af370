"""Steps 1–4 of a call: lookup, validation, capability policy, permission gate.

The client runs them before planning a batch and the worker runs them again
right before the tool, against the same policy snapshot, so both see the same
answer from the same code. Every early end is a `Refused` carrying the result
the model gets and the ledger event that records why.

A call whose decision is `ask` is `Admitted` while a batch plans it (the batch
asks a human). With `approved_by`, the approval turns it into an allow; with
`to_run` (the worker, right before the tool) and no approval, it is denied.
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
from runtime.results import endings
from runtime.types import Mode, ToolCall, ToolResult

NAME_CHARS = 200  # what a result repeats of a tool name no tool has


@dataclass(frozen=True)
class Admitted:
    call: ToolCall
    spec: CapabilitySpec
    arguments: BaseModel
    decision: Decision
    # An org policy hook that let through what the gate would ask about
    # ("hook:<name>"): the signed message carries it as the approval.
    approved_by: str | None = None


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
    approved_by: str | None = None,
    to_run: bool = False,
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
        result = endings.invalid_arguments(call.id, spec.name, fault)
        return Refused(call, spec, result, EventKind.invalid_arguments)
    arguments = validate(spec.input_model, call.arguments)
    if isinstance(arguments, Invalid):
        result = endings.invalid_arguments(call.id, spec.name, arguments.message)
        return Refused(call, spec, result, EventKind.invalid_arguments)
    if not spec.can_run(mode):
        result = endings.disabled(call.id, spec.name, mode)
        return Refused(call, spec, result, EventKind.disabled)
    decision = evaluate(spec, arguments, mode=mode, workspace=workspace, policy=policy)
    if decision.effect is Effect.deny:
        return refuse(call, spec, decision)
    if decision.effect is Effect.ask and approved_by is not None:
        decision = Decision.allow(
            f"approved by {approved_by}", rule=decision.rule, source=f"approval:{approved_by}"
        )
    elif decision.effect is Effect.ask and to_run:
        return refuse(
            call,
            spec,
            Decision.deny(
                f"{decision.reason}, and no approval came with it",
                rule=decision.rule,
                source="worker",
            ),
        )
    return Admitted(call, spec, arguments, decision)


def refuse(call: ToolCall, spec: CapabilitySpec | None, decision: Decision) -> Refused:
    """A `denied` result that says why, for the model and the ledger."""
    name = spec.name if spec else call.name
    result = endings.denied(call.id, name, decision.reason)
    return Refused(call, spec, result, EventKind.decision, decision)


def _unsupported(call: ToolCall) -> ToolResult:
    name = _bounded(call.name)
    message = (
        f"{name!r} is a {call.kind} call, which toolrun does not run (it runs function "
        "tools only); it was not run. Use a function tool for this instead"
    )
    return endings.unsupported(call.id, name, message)


def _bounded(name: object) -> str:
    name = name if isinstance(name, str) else repr(name)
    if len(name) > NAME_CHARS:  # a made-up name is model output: keep the result bounded
        name = name[:NAME_CHARS] + "…"
    return name


def _unknown(call: ToolCall, registry: Registry) -> ToolResult:
    name = _bounded(call.name)
    return endings.unknown_tool(
        call.id, name, close=registry.closest(name), available=registry.names()
    )
