"""Which allow rule an "approve and remember" answer may add for a call
(docs/architecture.md, "Remembered rules"), as Claude Code's "yes, and don't
ask again" offers it: this command, this path, this host, or this tool when
its calls name nothing.

The narrowest rule is made from the call itself: `Tool(/absolute/path)` for a
file tool (absolute, so it covers that one file and no namesake elsewhere),
`shell(the command)`, `http_get(the host)`, and `Tool` for a tool whose calls
name no subject. A person may ask for a wider pattern instead; it must still
be an allow rule for this tool that covers this call, and only a role that may
widen (an admin key, the operator's own CLI) may have anything wider than the
narrowest rule. A remembered rule is an allow rule at the user level: no deny
or ask rule of any level ever yields to it (runtime/gate/permissions.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from runtime.errors import ConfigurationError
from runtime.gate.decision import Effect
from runtime.gate.rules import Level, matching, parse
from runtime.registry.capabilities import CapabilitySpec
from runtime.workspace import resolve_inside

GLOB = set("*?[]")


class RememberRefused(ValueError):
    """The rule cannot be remembered for this call; the message says why."""


class BeyondRole(RememberRefused):
    """The rule or scope is wider than the answerer's role may grant."""


def rule_for(
    spec: CapabilitySpec,
    arguments: Any,
    workspace: Path,
    wanted: str | None = None,
    *,
    may_widen: bool,
) -> str:
    """The rule to remember for a call of `spec` with `arguments` in `workspace`."""
    try:
        typed = spec.input_model.model_validate(arguments)
    except ValidationError as error:
        raise RememberRefused(f"the call's arguments are not valid: {error}") from None
    kind, subjects = spec.rule_subjects(typed)
    narrowest = _narrowest(spec.name, kind, subjects, workspace)
    if wanted is None or wanted.strip() == narrowest:
        if narrowest is None:
            raise RememberRefused(
                f"no single rule names this {spec.name} call (it names {len(subjects)} "
                "subjects); give one with --rule"
            )
        return narrowest
    try:
        rule = parse(wanted, Effect.allow, Level.user, "remembered")
    except ConfigurationError as error:
        raise RememberRefused(str(error).removeprefix("remembered: ")) from None
    if not rule.names(spec.name) or rule.tool != spec.name:
        raise RememberRefused(f"rule {rule.text} is not a rule for {spec.name}")
    if not matching([rule], spec.name, kind, subjects, workspace):
        raise RememberRefused(f"rule {rule.text} does not cover the call it answers")
    if not may_widen:
        exact = narrowest or f"{spec.name}(...)"
        raise BeyondRole(
            f"rule {rule.text} is wider than this call ({exact}); only an admin may "
            "remember a wider rule"
        )
    return rule.text


def _narrowest(tool: str, kind: str | None, subjects: list[str], workspace: Path) -> str | None:
    if kind is None:
        return tool
    if len(subjects) != 1:
        return None
    subject = subjects[0]
    if kind == "path":
        subject = resolve_inside(workspace, subject).as_posix()
    elif kind == "url":
        subject = urlsplit(subject).hostname or subject
    if GLOB & set(subject) or ")" in subject:  # it would be read as a pattern: too wide
        return None
    return f"{tool}({subject})"
