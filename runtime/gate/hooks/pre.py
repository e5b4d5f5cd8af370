"""Pre hooks: each admitted call, after the gate decided and before the batch
is planned, shown to the policy's pre hooks in order (org, project, user),
each seeing the decision and the arguments as the hooks before it left them
(docs/architecture.md, "Policy hooks").

What holds, whatever a hook answers:
- A call the gate denied or refused never reaches a hook: no hook weakens a deny.
- A hook's `deny` ends the call `denied`, naming the hook and its reason; its
  `ask` makes an allowed call wait for a person (in `auto` mode, where nobody
  answers, it is a deny). Only an org hook's `allow` lifts the gate's `ask`,
  and only one an allow rule would lift (the mode's, `requires_approval`);
  a user's or project's `allow` counts for nothing.
- Replaced arguments are validated against the tool's schema (invalid: an
  `invalid_arguments` result naming the hook) and go through the whole gate
  again: the stricter of the two decisions stands, so a replacement never
  reaches what the gate would not have let the call do.
- A hook that fails under `on_failure: closed` denies the call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runtime.gate.admission import Admitted, Refused, admit, refuse
from runtime.gate.decision import Decision, Effect
from runtime.gate.hooks.calling import Consulted, consult
from runtime.gate.hooks.declaration import Hook
from runtime.gate.policy import Policy
from runtime.ledger.rows import event_fields
from runtime.ledger.tables import EventKind
from runtime.registry.capabilities import Registry
from runtime.registry.validation import Invalid, validate
from runtime.results import endings
from runtime.types import Mode, ToolCall

STRICTNESS = {Effect.allow: 0, Effect.ask: 1, Effect.deny: 2}


@dataclass(frozen=True)
class Gate:
    """What a replaced argument is admitted again under, and what hooks are told."""

    registry: Registry
    mode: Mode
    workspace: Path
    policy: Policy
    batch_id: str
    key: bytes
    redactor: Any
    max_argument_bytes: int


@dataclass(frozen=True)
class Screened:
    admission: Admitted | Refused
    consulted: tuple[Consulted, ...] = ()


def screen(admission: Admitted | Refused, gate: Gate) -> Screened:
    if not isinstance(admission, Admitted):
        return Screened(admission)
    hooks = [h for h in gate.policy.hooks if h.when == "pre" and h.sees(admission.spec.name)]
    consulted: list[Consulted] = []
    current: Admitted | Refused = admission
    for hook in hooks:
        asked = consult(hook, request(current, hook, gate), gate.key, admission.spec.name)
        consulted.append(asked)
        current = _judged(current, asked, gate)
        if isinstance(current, Refused):
            break
    if isinstance(current, Admitted):
        decision = current.decision
        lifted = decision.effect is Effect.allow and decision.rule.startswith("hook:")
        current = replace(current, approved_by=decision.rule if lifted else None)
    return Screened(current, tuple(consulted))


def request(admitted: Admitted, hook: Hook, gate: Gate) -> dict[str, Any]:
    """What a pre hook is shown of a call."""
    arguments = admitted.call.arguments
    return {
        "event": "pre_tool_use",
        "hook": hook.name,
        "batch_id": gate.batch_id,
        "call_id": admitted.call.id,
        "tool": admitted.spec.name,
        "arguments": gate.redactor.redact(arguments) if hook.redact else arguments,
        "risk": admitted.spec.risk.value,
        "mode": gate.mode.value,
        "workspace": str(gate.workspace),
        "submitter": gate.policy.submitter,
        "decision": admitted.decision.as_dict(),
    }


def event(batch_id: str, call_id: str, asked: Consulted, redactor: Any) -> dict[str, Any]:
    """The hook's ledger row (kind `hook`), written with the batch's rows. Its
    `effect` stays empty: the call's decision row says what was decided."""
    return event_fields(batch_id, call_id, EventKind.hook, redactor=redactor, **asked.fields())


def _judged(current: Admitted, asked: Consulted, gate: Gate) -> Admitted | Refused:
    hook, answer, call = asked.hook, asked.answer, current.call
    rule = f"hook:{hook.name}"
    if asked.failed_closed:
        reason = f"hook {hook.name!r} failed ({asked.failure}) and the policy fails closed"
        return refuse(call, current.spec, Decision.deny(reason, rule=rule, source=hook.source))
    if answer.arguments is not None:
        replaced = _replaced(current, answer.arguments, hook, gate)
        if isinstance(replaced, Refused):
            return replaced
        current = replaced
    said = f": {answer.reason}" if answer.reason else ""
    effect = current.decision.effect
    if answer.effect is Effect.deny or (answer.effect is Effect.ask and gate.mode is Mode.auto):
        why = " asks, and auto mode has nobody to ask" if answer.effect is Effect.ask else ""
        decision = Decision.deny(f"hook {hook.name!r}{why}{said}", rule=rule, source=hook.source)
        return refuse(call, current.spec, decision)
    if answer.effect is Effect.ask and effect is Effect.allow:
        decision = Decision.ask(f"hook {hook.name!r} asks{said}", rule=rule, source=hook.source)
        return replace(current, decision=decision)
    if answer.effect is Effect.allow and effect is Effect.ask and hook.org and _liftable(current):
        reason = f"allowed by hook {hook.name!r}{said}"
        return replace(current, decision=Decision.allow(reason, rule=rule, source=hook.source))
    return current


def _liftable(current: Admitted) -> bool:
    """Whether an allow may lift this ask: the one the mode's table or the
    tool's `requires_approval` made, as an allow rule would. An ask rule (of
    any level: ask beats allow), a protected file, an unknown risk and another
    hook's ask stand."""
    decision = current.decision
    return decision.source == "mode" or decision.rule == "requires_approval"


def _replaced(
    current: Admitted, arguments: dict[str, Any], hook: Hook, gate: Gate
) -> Admitted | Refused:
    """The call with the hook's arguments, admitted again; the stricter decision stands."""
    call, spec = current.call, current.spec
    checked = validate(spec.input_model, arguments)
    if isinstance(checked, Invalid):
        problem = f"hook {hook.name!r} replaced them with invalid ones: {checked.message}"
        result = endings.invalid_arguments(call.id, spec.name, problem)
        return Refused(call, spec, result, EventKind.invalid_arguments)
    again = admit(
        ToolCall(id=call.id, name=call.name, arguments=arguments, kind=call.kind),
        registry=gate.registry,
        mode=gate.mode,
        workspace=gate.workspace,
        policy=gate.policy,
        max_argument_bytes=gate.max_argument_bytes,
    )
    if isinstance(again, Refused):
        return again
    kept = current.decision
    stricter = STRICTNESS[again.decision.effect] > STRICTNESS[kept.effect]
    return replace(again, decision=again.decision if stricter else kept)
