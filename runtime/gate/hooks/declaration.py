"""Policy hooks as a settings file declares them (docs/architecture.md,
"Policy hooks"):

    {"hooks": [
        {"name": "opa", "when": "pre", "kind": "http", "url": "https://opa.internal/v1/toolrun",
         "timeout": 2, "on_failure": "closed", "tools": ["shell", "write_*"]},
        {"name": "lint", "when": "post", "kind": "command", "command": ["./hooks/lint.sh"]},
        {"name": "owner", "when": "pre", "kind": "python", "callable": "acme.hooks:check",
         "redact": false}]}

`when` is `pre` (each call, after the gate decided, before it is planned) or
`post` (each result a worker formatted). `tools` (globs over tool names)
narrows the calls a hook sees; all, without it. `redact` (default true): the
hook sees the arguments and the result as the redaction set leaves them.
`on_failure` (default `closed`): what a pre hook that times out, cannot be
reached or answers nonsense means: `closed` denies the call, `open` gives no
opinion. The org file declares any hook; a user file or (in a trusted
workspace only) a project file declares hooks that may only tighten: their
`allow` counts for nothing (runtime/gate/hooks/pre.py).
"""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from runtime.errors import ConfigurationError
from runtime.gate.rules import Level

KINDS = {"python": "callable", "http": "url", "command": "command"}  # kind -> its target's key
FIELDS = {"name", "when", "kind", "timeout", "on_failure", "tools", "redact", *KINDS.values()}
DEFAULT_TIMEOUT = 5.0  # seconds
MAX_TIMEOUT = 60.0


@dataclass(frozen=True)
class Hook:
    name: str
    when: Literal["pre", "post"]
    kind: Literal["python", "http", "command"]
    target: str | tuple[str, ...]  # the callable's dotted name, the URL or the command
    level: str  # org, project or user: an org hook may allow, the others only tighten
    source: str  # the settings file that declares it
    timeout: float = DEFAULT_TIMEOUT
    on_failure: Literal["closed", "open"] = "closed"
    tools: tuple[str, ...] = ()
    redact: bool = True

    @property
    def org(self) -> bool:
        return self.level == Level.org.name

    def sees(self, tool: str) -> bool:
        return not self.tools or any(fnmatch.fnmatchcase(tool, glob) for glob in self.tools)

    def as_dict(self) -> dict[str, Any]:
        """As the signed policy snapshot carries it to the worker."""
        data = asdict(self)
        data["target"] = list(self.target) if isinstance(self.target, tuple) else self.target
        data["tools"] = list(self.tools)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hook:
        target = data["target"]
        return cls(
            **{
                **data,
                "target": tuple(target) if isinstance(target, list) else target,
                "tools": tuple(data.get("tools", ())),
            }
        )


def read(data: dict[str, Any], source: str, level: Level) -> tuple[Hook, ...]:
    """A settings file's hooks; a malformed one is a `ConfigurationError`
    naming the file and the entry."""
    entries = data.get("hooks", [])
    if not isinstance(entries, list):
        raise ConfigurationError(f"{source}: hooks must be a list of hooks")
    found = [
        _hook(entry, f"{source}: hooks[{index}]", source, level)
        for index, entry in enumerate(entries)
    ]
    names = [hook.name for hook in found]
    if len(names) != len(set(names)):
        raise ConfigurationError(f"{source}: two hooks share a name; name each one")
    return tuple(found)


def _hook(entry: Any, where: str, source: str, level: Level) -> Hook:
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where} must be an object with a name, when and kind")
    unknown = sorted(set(entry) - FIELDS)
    if unknown:
        raise ConfigurationError(f"{where}: unknown key(s) {unknown}; known: {sorted(FIELDS)}")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"{where}.name must be a non-empty string")
    when, kind = entry.get("when"), entry.get("kind")
    if when not in ("pre", "post"):
        raise ConfigurationError(f"{where}.when must be pre or post")
    if kind not in KINDS:
        raise ConfigurationError(f"{where}.kind must be one of {sorted(KINDS)}")
    others = sorted(set(KINDS.values()) & set(entry) - {KINDS[kind]})
    if others:
        raise ConfigurationError(f"{where}: a {kind} hook has no {others}")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ConfigurationError(f"{where}.timeout must be a number of seconds")
    if not 0 < timeout <= MAX_TIMEOUT:
        raise ConfigurationError(f"{where}.timeout must be above 0 and at most {MAX_TIMEOUT:g}")
    on_failure = entry.get("on_failure", "closed")
    if on_failure not in ("closed", "open"):
        raise ConfigurationError(f"{where}.on_failure must be closed or open")
    tools = entry.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
        raise ConfigurationError(f"{where}.tools must be a list of tool names or globs")
    redact = entry.get("redact", True)
    if not isinstance(redact, bool):
        raise ConfigurationError(f"{where}.redact must be true or false")
    return Hook(
        name=name,
        when=when,
        kind=kind,
        target=_target(kind, entry.get(KINDS[kind]), f"{where}.{KINDS[kind]}"),
        level=level.name,
        source=source,
        timeout=float(timeout),
        on_failure=on_failure,
        tools=tuple(tools),
        redact=redact,
    )


def _target(kind: str, value: Any, where: str) -> str | tuple[str, ...]:
    if kind == "python":
        module, _, attribute = value.partition(":") if isinstance(value, str) else ("", "", "")
        if not module or not attribute:
            raise ConfigurationError(f"{where} must name a callable as package.module:function")
        return value
    if kind == "http":
        if not isinstance(value, str) or urlsplit(value).scheme not in ("http", "https"):
            raise ConfigurationError(f"{where} must be an http:// or https:// URL")
        if not urlsplit(value).hostname:
            raise ConfigurationError(f"{where} names no host")
        return value
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        return tuple(value)
    raise ConfigurationError(f"{where} must be a shell command or a list of arguments")
