"""Rules bind, or they are refused: a rule's specifier must have something of
the tool to match.

A specifier is matched against a tool's subject (the workspace paths of a file
tool or of an MCP tool's path-like arguments, the command of `shell`, the URL of
`http_get`). On a tool that has none, `Tool(specifier)` would match no call at
all: a deny rule would fail open and an allow rule would never allow. So such a
rule is a `ConfigurationError` naming it and where it came from, at startup for
the org and user files and at submit for the project file and a batch's rules
(docs/architecture.md, the permission gate). A rule whose tool is a glob
(`fs__*(.env)`) binds to the tools it names that have a subject, and is refused
only if none of them has one.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.errors import ConfigurationError
from runtime.gate.rules import Rule
from runtime.registry.capabilities import CapabilitySpec, Registry


def check(rules: Iterable[Rule], registry: Registry) -> None:
    """`ConfigurationError` for the first rule whose specifier cannot bind."""
    for rule in rules:
        if rule.specifier is None:
            continue
        named = [spec for spec in registry if rule.names(spec.name)]
        if named and not any(_has_subject(spec) for spec in named):
            what = named[0].name if len(named) == 1 else f"the tools {rule.tool} names"
            raise ConfigurationError(
                f"{rule.source}: {rule.effect.value} rule {rule.text!r} has a specifier, but "
                f"{what} takes no path, command or URL for it to match, so it would match "
                f"no call; write `{rule.tool}` to cover every call of it"
            )


def _has_subject(spec: CapabilitySpec) -> bool:
    return spec.subject is not None or bool(spec.paths)
