"""Permission rules in the syntax people already write for Claude Code:
`Tool` or `Tool(specifier)`, in `deny`, `ask` and `allow` lists.

The specifier is matched against the tool's own subject: a glob over
workspace-relative paths for file tools (`read_file(src/**)`, `write_file(*.md)`),
a command prefix with `*` for `shell` (`shell(git diff *)`), a host pattern for
URL tools (`http_get(*.example.com)`). A rule that cannot be parsed is a
`ConfigurationError` naming where it came from; it is never ignored.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from urllib.parse import urlsplit

from runtime.errors import ConfigurationError
from runtime.gate.decision import Effect
from runtime.gate.shell import commands
from runtime.workspace import resolve_inside

_RULE = re.compile(r"^(?P<tool>[A-Za-z0-9_\-*]{1,64})(?:\((?P<spec>.+)\))?$", re.S)


class Level(IntEnum):
    """Where a rule comes from; a lower number is a higher authority."""

    org = 0
    project = 1
    user = 2
    batch = 3


@dataclass(frozen=True)
class Rule:
    tool: str
    specifier: str | None
    effect: Effect
    level: Level
    source: str  # the settings file it came from, or "submit"
    text: str

    def names(self, tool: str) -> bool:
        return fnmatch.fnmatchcase(tool, self.tool)

    def as_dict(self) -> dict:
        return {
            "rule": self.text,
            "effect": self.effect.value,
            "level": self.level.name,
            "source": self.source,
        }


def parse(text: object, effect: Effect, level: Level, source: str) -> Rule:
    if not isinstance(text, str) or not (match := _RULE.match(text.strip())):
        raise ConfigurationError(
            f"{source}: invalid {effect.value} rule {text!r}; write `Tool` or `Tool(specifier)`"
        )
    spec = match["spec"]
    if spec is not None and not spec.strip():
        raise ConfigurationError(f"{source}: invalid {effect.value} rule {text!r}: empty specifier")
    return Rule(match["tool"], spec.strip() if spec else None, effect, level, source, text.strip())


def matching(
    rules: Iterable[Rule], tool: str, kind: str | None, subjects: list[str], workspace: Path
) -> list[Rule]:
    """The rules that cover this call. Deny and ask rules cover it when any of
    its subjects (a path, a part of a compound command) matches: restricting
    must not be dodged by adding a second part. Allow rules must cover all of
    it: every path, and every part of a command, where different allow rules
    may cover different parts (`git diff && git status` under `shell(git diff *)`
    and `shell(git status)`)."""
    named = [rule for rule in rules if rule.names(tool)]
    if kind != "command" or not subjects:
        return [rule for rule in named if _covers(rule, kind, subjects, workspace)]
    analysis = commands.analyze(subjects[0], workspace)
    out = [
        rule
        for rule in named
        if rule.specifier is None
        or (rule.effect is not Effect.allow and commands.denied_by([rule.specifier], analysis))
    ]
    allows = [rule for rule in named if rule.effect is Effect.allow and rule.specifier]
    if allows and commands.allowed_by([rule.specifier for rule in allows], analysis):
        out += [
            rule
            for rule in allows
            if any(commands.covers(rule.specifier, part) for part in analysis.segments)
        ]
    return out


# The tools that show a file's text: a deny rule for one binds every file any of
# them opens, a search's walk included (docs/architecture.md, "The permission gate").
READING_TOOLS = ("read_file", "search_files")


def reading_denials(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """The deny rules that name a reading tool (`READING_TOOLS`)."""
    return tuple(
        rule
        for rule in rules
        if rule.effect is Effect.deny and any(rule.names(tool) for tool in READING_TOOLS)
    )


def denying_reading(denials: Iterable[Rule], path: str, workspace: Path) -> Rule | None:
    """The first of `denials` (`reading_denials`) that denies reading `path`, as
    it would deny `read_file` of it; None if none does."""
    for rule in denials:
        if rule.specifier is None or _path_match(rule.specifier, path, workspace):
            return rule
    return None


def _covers(rule: Rule, kind: str | None, subjects: list[str], workspace: Path) -> bool:
    if rule.specifier is None:
        return True
    if kind is None or not subjects:
        return False
    test = _path_match if kind == "path" else _host_match
    hits = [test(rule.specifier, subject, workspace) for subject in subjects]
    return all(hits) if rule.effect is Effect.allow else any(hits)


def _path_match(pattern: str, path: str, workspace: Path) -> bool:
    """gitignore-like: a pattern without `/` matches a name at any depth; with `/`
    it is anchored at the workspace root, or, when it starts with `/`, it is an
    absolute path (so a deny rule written with one cannot fail open); `**`
    crosses directories, `*` does not. The path is matched where it really
    resolves, so `link/x` cannot dodge a rule about `secrets/x`."""
    try:
        resolved = resolve_inside(workspace, path)
        relative = resolved.relative_to(Path(workspace).resolve())
    except Exception:  # noqa: BLE001 - outside paths are refused by the workspace check
        return False
    if pattern.startswith("/"):  # an absolute pattern: where the path really is
        return _glob("/" + pattern.lstrip("/"), resolved.as_posix())
    text = relative.as_posix()
    pattern = pattern.removeprefix("./")
    if "/" not in pattern.rstrip("/"):
        return any(_glob(pattern.rstrip("/"), part) for part in relative.parts)
    pattern = pattern.rstrip("/")
    if not any(char in pattern for char in "*?["):  # a plain path covers what is under it
        return text == pattern or text.startswith(pattern + "/")
    return _glob(pattern, text)


def _glob(pattern: str, text: str) -> bool:
    regex = ""
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            regex, index = regex + "(?:.*/)?", index + 3
        elif pattern.startswith("**", index):
            regex, index = regex + ".*", index + 2
        elif pattern[index] == "*":
            regex, index = regex + "[^/]*", index + 1
        elif pattern[index] == "?":
            regex, index = regex + "[^/]", index + 1
        else:
            regex, index = regex + re.escape(pattern[index]), index + 1
    return re.fullmatch(regex, text) is not None


def _host_match(pattern: str, url: str, workspace: Path) -> bool:
    host = (urlsplit(url).hostname or "") if "://" in url else ""
    pattern = pattern.removeprefix("domain:").lower()
    return bool(host) and fnmatch.fnmatchcase(host.lower(), pattern)
