"""The permission gate: the input itself, rules, workspace trust, mode and risk
→ a `Decision`.

One piece of code, used by the client before it plans a batch and by the worker
again right before the tool runs, against the same policy snapshot.

The order (first that applies wins):
1. input checks: every path inside the workspace; no write to a settings file;
   the workspace under a root org policy admits;
2. a deny rule at any level;
3. a write to git's configuration or hooks or a shell's rc file asks, in every
   mode but bypass, whatever the rules say;
4. an untrusted workspace runs only read tools, unless an org rule allows the call;
5. unknown risk always asks;
6. an ask rule at any level, then an allow rule at any level (a rule's `*` never
   covers a shell flag that escapes: `runtime.gate.shell.flags`);
7. the mode × risk table (a tool that `requires_approval` asks where the table
   would allow);
and in `auto`, where nobody can answer, every ask becomes a deny.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from runtime.errors import PathOutsideWorkspace
from runtime.gate import misses
from runtime.gate.decision import Decision, Effect
from runtime.gate.policy import Policy
from runtime.gate.protected import protected_file, refuse_home_path, refuse_settings_path
from runtime.gate.rules import Level, Rule, matching
from runtime.gate.shell import commands
from runtime.registry.capabilities import CapabilitySpec
from runtime.types import Mode, Risk
from runtime.workspace import resolve_inside

__all__ = ["MODE_TABLE", "Decision", "Effect", "evaluate", "offered"]

A, Q, D = Effect.allow, Effect.ask, Effect.deny

# What the mode and the risk decide when no rule matches (docs/architecture.md, "Semantics").
_TABLE = """
              read   write  external  destructive  unknown
plan          allow  deny   deny      deny         deny
default       allow  ask    ask       ask          ask
accept_edits  allow  allow  ask       ask          ask
auto          allow  deny   deny      deny         deny
bypass        allow  allow  allow     deny         ask
"""
_HEAD, *_ROWS = [line.split() for line in _TABLE.strip().splitlines()]
MODE_TABLE: dict[Mode, dict[Risk, Effect]] = {
    Mode(row[0]): {Risk(risk): Effect(cell) for risk, cell in zip(_HEAD, row[1:], strict=True)}
    for row in _ROWS
}


def evaluate(
    spec: CapabilitySpec, arguments: BaseModel, *, mode: Mode, workspace: Path, policy: Policy
) -> Decision:
    decision = _decide(spec, arguments, mode, Path(workspace), policy)
    if decision.effect is Effect.ask and mode is Mode.auto:
        return Decision.deny(
            f"{decision.reason}; in auto mode nobody can approve it",
            rule=decision.rule,
            source=decision.source,
        )
    return decision


def offered(spec: CapabilitySpec, mode: Mode, policy: Policy | None = None) -> bool:
    """Can some call of this tool run in `mode` under `policy` (None: a trusted
    workspace without rules)? What a model is offered: a tool the gate refuses
    whatever its arguments (a write in plan mode, an untrusted server's tool in
    auto, a tool denied outright) is left out of the definitions."""
    if not spec.can_run(mode):
        return False
    rules = [r for r in (policy.rules if policy else ()) if r.names(spec.name)]
    if any(r.effect is D and r.specifier is None for r in rules):
        return False
    allowed = any(r.effect is A for r in rules)
    if policy is not None and not policy.trusted and spec.risk is not Risk.read:
        return any(r.effect is A and r.level is Level.org for r in rules)
    if spec.risk is Risk.unknown:  # always asks: runs only where someone can answer
        return mode is not Mode.auto
    if MODE_TABLE[mode][spec.risk] is not D:
        return True
    return allowed or (mode is not Mode.auto and any(r.effect is Q for r in rules))


def _decide(spec, arguments, mode: Mode, workspace: Path, policy: Policy) -> Decision:
    if mode is Mode.plan and spec.risk is not Risk.read:
        return Decision.deny(
            "only read-only tools run in plan mode", rule="mode:plan", source="mode"
        )
    refusal = _input_refusal(spec, arguments, workspace, policy)
    if refusal is not None:
        return refusal
    kind, subjects = spec.rule_subjects(arguments)
    hits = matching(policy.rules, spec.name, kind, subjects, workspace)
    deny = _first(hits, Effect.deny)
    if deny is not None:
        return Decision.deny(
            f"a deny rule forbids this call ({deny.text})", rule=deny.text, source=deny.source
        )
    guarded = None if mode is Mode.bypass else _guarded(spec, arguments, kind, subjects, workspace)
    if guarded is not None:
        return Decision.ask(guarded, rule="protected-file", source="runtime")
    if not policy.trusted and spec.risk is not Risk.read:
        org_allow = next((r for r in hits if r.effect is A and r.level is Level.org), None)
        if org_allow is None:
            return Decision.deny(
                # The advice first: a screen's one-line summary keeps it whatever the path.
                "untrusted workspace, so only read-only tools run; the user can trust it "
                f"with `toolrun trust DIR` (workspace {policy.workspace})",
                rule="workspace-trust",
                source="trust",
            )
        return _from_rule(org_allow)
    if spec.risk is Risk.unknown:
        return Decision.ask(
            "the tool's risk is unknown, so it always asks", rule="risk:unknown", source="registry"
        )
    rule = _first(hits, Effect.ask) or _first(hits, Effect.allow)
    if rule is not None:
        return _from_rule(rule)
    effect = MODE_TABLE[mode][spec.risk]
    asks = effect is A and spec.requires_approval and spec.risk is not Risk.read
    note = None
    if effect is not A or asks:
        note = misses.note(policy.rules, spec.name, kind, subjects, workspace)
    if asks:
        reason = f"{spec.name} requires approval"
        reason = f"{reason}; {note}" if note else reason
        return Decision.ask(reason, rule="requires_approval", source="registry")
    verb = {A: "run", Q: "need approval", D: "are denied"}[effect]
    reason = f"{spec.risk.value} tools {verb} in {mode.value} mode without a rule"
    reason = f"{reason}; {note}" if note else reason
    return Decision(effect, reason, f"mode:{mode.value}", "mode")


def _guarded(spec, arguments, kind, subjects: list[str], workspace: Path) -> str | None:
    """Why the call writes git's configuration or hooks or a shell's rc file
    (docs/architecture.md, "The permission gate"), or None."""
    if kind == "command" and subjects:
        if ">" not in subjects[0]:  # every redirect that writes has one
            return None
        return commands.guarded_redirects(commands.analyze(subjects[0], workspace))
    if spec.risk is Risk.read:
        return None
    root = workspace.resolve()
    for path in spec.subject_paths(arguments):
        reason = protected_file(root, path, resolve_inside(root, path))
        if reason:
            return reason
    return None


def _input_refusal(spec, arguments, workspace: Path, policy: Policy) -> Decision | None:
    if policy.roots is not None and not any(
        workspace.resolve().is_relative_to(Path(root).expanduser().resolve())
        for root in policy.roots
    ):
        return Decision.deny(
            f"workspace {workspace} is outside the roots org policy admits",
            rule="workspace-roots",
            source="org",
        )
    for path in spec.subject_paths(arguments):
        try:
            resolved = resolve_inside(workspace, path)
            if spec.risk is not Risk.read:
                refuse_settings_path(workspace.resolve(), path, resolved)
        except PathOutsideWorkspace as error:
            return Decision.deny(str(error), rule="workspace", source="runtime")
        try:
            refuse_home_path(workspace.resolve(), path, resolved)
        except PathOutsideWorkspace as error:
            return Decision.deny(str(error), rule="toolrun-home", source="runtime")
    return None


def _first(rules: list[Rule], effect: Effect) -> Rule | None:
    """The matching rule of `effect` from the highest level (org first)."""
    return min((r for r in rules if r.effect is effect), key=lambda r: r.level, default=None)


def _from_rule(rule: Rule) -> Decision:
    verb = {A: "allows", Q: "asks for"}[rule.effect]
    return Decision(
        rule.effect,
        f"rule {rule.text} ({rule.level.name}) {verb} this call",
        rule.text,
        rule.source,
    )
