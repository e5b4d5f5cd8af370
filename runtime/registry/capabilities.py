"""The capability registry: what can run, and what each tool promises.

A tool is a plain function `fn(args: InputModel, ctx: ToolContext)` registered
with `@tool(...)`. The registry is the only place that knows tools by name; the
executor asks it for a `CapabilitySpec` and never imports a tool directly.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from runtime.errors import ConfigurationError
from runtime.types import Mode, Risk
from runtime.workspace import resolve_inside

if typing.TYPE_CHECKING:  # a module of tools loads no secret detectors
    from runtime.redaction import Redactor

SubjectKind = Literal["path", "command", "url"]
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolInput(BaseModel):
    """Base for tool input models: unknown fields are an error the model sees."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ToolOutput:
    """What a tool returns: structured content plus the text the model reads and
    the one line a screen shows."""

    content: Any
    message: str
    summary: str
    media: list[Any] = field(default_factory=list)  # `Media`: images and documents
    # What the tool says it spent, by name ({"usd": 0.002, "api_calls": 3}): kept
    # in the call's usage record (docs/architecture.md, "Usage and budgets").
    spent: dict[str, float] = field(default_factory=dict)


def _denies_nothing(path: Path) -> str | None:
    """A call's default `reading_denied`: no deny rule forbids showing any file."""
    return None


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know about its call."""

    workspace: Path
    batch_id: str
    call_id: str
    max_bytes: int = 32 * 1024
    # The worker's redactor (its settings' patterns; None: the built-in detectors):
    # a tool that matches or cuts text does so on the redacted text
    # (docs/architecture.md, "Secrets"; `runtime.tools.bounds.redactor_of`).
    redactor: Redactor | None = None
    # Internal hosts and ranges the org policy lets a network tool reach
    # (docs/architecture.md, "Internal addresses"); none by default.
    internal_hosts: tuple[str, ...] = ()
    # Which reading tool's deny rule of the batch forbids showing a file (its
    # absolute path): the rule's text, or None. A search checks every file it
    # opens, as read_file of it would be (docs/architecture.md, "The permission
    # gate"); the default denies nothing.
    reading_denied: Callable[[Path], str | None] = field(default=_denies_nothing)
    # Whether the processes the call starts run in the sandbox (docs/architecture.md,
    # "The sandbox"): false only where the org policy or the worker's settings turned
    # it off; each process then started is noted in `unconfined`, and the call's
    # summary says so.
    confined: bool = True
    unconfined: list[str] = field(default_factory=list)
    # The hosts the org policy lets the call's sandboxed processes reach, through
    # a proxy (`sandbox.network.allow`); none by default: no network at all.
    network: tuple[str, ...] = ()
    # What the tool has reported spending so far (`spend`), kept in its usage
    # record even if it then fails (docs/architecture.md, "Usage and budgets").
    spent: dict[str, float] = field(default_factory=dict)

    def spend(self, **amounts: float) -> None:
        """Report what the call spent (`ctx.spend(usd=0.002, api_calls=1)`),
        added to what it reported before; a `ToolOutput.spent` adds to it too."""
        for name, amount in amounts.items():
            self.spent[name] = self.spent.get(name, 0.0) + amount

    def resolve(self, path: str) -> Path:
        """`path` made absolute inside the workspace, or `PathOutsideWorkspace`."""
        return resolve_inside(self.workspace, path)


@dataclass(frozen=True)
class CapabilitySpec:
    """Everything the runtime knows about one tool."""

    name: str
    description: str
    input_model: type[BaseModel]
    execute: Callable[[Any, ToolContext], Any]
    risk: Risk = Risk.unknown
    idempotent: bool = False
    requires_approval: bool = False
    timeout: float | None = None
    schema_version: str = "1"
    paths: tuple[str, ...] = ()
    subject: tuple[SubjectKind, str] | None = None
    transient: tuple[type[BaseException], ...] = field(default=())
    retry_attempts: int = 3
    retry_max_delay: float = 5.0
    host: str | None = None  # the host every call reaches (an MCP server's URL): rates per host

    @property
    def parallel(self) -> bool:
        """Only read-only tools run beside each other (docs/architecture.md, "Semantics")."""
        return self.risk is Risk.read

    def can_run(self, mode: Mode) -> bool:
        """Capability policy: is this tool enabled at all in `mode`?"""
        return mode is not Mode.plan or self.risk is Risk.read

    def subject_paths(self, arguments: BaseModel) -> list[str]:
        """The workspace paths a call names, for the input-aware permission check:
        each string of a `paths` field, or of a list in one (an MCP tool's `paths`)."""
        found = []
        for name in self.paths:
            value = getattr(arguments, name, None)
            found += value if isinstance(value, list) else [value]
        return [value for value in found if isinstance(value, str)]

    def rule_subjects(self, arguments: BaseModel) -> tuple[SubjectKind | None, list[str]]:
        """What a rule's specifier is matched against: the workspace paths of a
        file tool, the command of `shell`, the URL of `http_get`."""
        if self.subject is not None:
            kind, name = self.subject
            value = getattr(arguments, name, None)
            return kind, [value] if isinstance(value, str) else []
        if self.paths:
            return "path", self.subject_paths(arguments)
        return None, []

    def json_schema(self) -> dict[str, Any]:
        """The tool as a model and an operator see it: its name, description,
        its arguments' JSON Schema, and the promises a caller plans by (risk,
        idempotent, approval, timeout, schema version)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_model.model_json_schema(),
            "risk": self.risk.value,
            "idempotent": self.idempotent,
            "requires_approval": self.requires_approval,
            "timeout": self.timeout,
            "schema_version": self.schema_version,
        }


class Registry:
    """Tools by name."""

    def __init__(self) -> None:
        self._specs: dict[str, CapabilitySpec] = {}

    def register(self, spec: CapabilitySpec) -> CapabilitySpec:
        """Add a tool and return it. A name that does not match the allowed
        pattern, or one already taken by another function, raises
        `ConfigurationError`; registering the same function again is harmless
        (a module imported twice)."""
        if not _NAME.match(spec.name):
            raise ConfigurationError(f"tool name {spec.name!r} must match {_NAME.pattern}")
        known = self._specs.get(spec.name)
        if known is not None and known.execute is not spec.execute:
            raise ConfigurationError(f"tool {spec.name!r} is registered twice")
        self._specs[spec.name] = spec
        return spec

    def get(self, name: str) -> CapabilitySpec | None:
        """The tool of that name; None for an unknown name or a name that is
        not a string (a model's call may carry anything)."""
        return self._specs.get(name) if isinstance(name, str) else None

    def closest(self, name: str, limit: int = 3) -> list[str]:
        """Up to `limit` registered names that look like `name`, best first:
        what an unknown tool's error suggests to the model."""
        return difflib.get_close_matches(str(name), list(self._specs), n=limit, cutoff=0.5)

    def names(self) -> list[str]:
        """Every registered tool's name, sorted."""
        return sorted(self._specs)

    def __iter__(self) -> Iterable[CapabilitySpec]:
        return iter(self._specs[name] for name in self.names())

    def __len__(self) -> int:
        return len(self._specs)

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool's `json_schema`, in name order."""
        return [spec.json_schema() for spec in self]


registry = Registry()


def tool(
    *,
    name: str | None = None,
    risk: Risk = Risk.unknown,
    idempotent: bool = False,
    requires_approval: bool = False,
    timeout: float | None = None,
    schema_version: str = "1",
    paths: Iterable[str] = (),
    subject: tuple[SubjectKind, str] | None = None,
    transient: Iterable[type[BaseException]] = (),
    retry_attempts: int = 3,
    retry_max_delay: float = 5.0,
    into: Registry | None = None,
) -> Callable[[Callable], Callable]:
    """Register `fn(args: InputModel, ctx: ToolContext)` as a tool.

    The input model comes from the first parameter's annotation; a model that
    allows unknown fields is tightened to forbid them.
    """

    def register(fn: Callable) -> Callable:
        hints = typing.get_type_hints(fn)
        params = [hint for key, hint in hints.items() if key != "return"]
        if not params or not (isinstance(params[0], type) and issubclass(params[0], BaseModel)):
            raise ConfigurationError(f"tool {fn.__name__}: first parameter needs a pydantic model")
        (registry if into is None else into).register(
            CapabilitySpec(
                name=name or fn.__name__,
                description=(fn.__doc__ or "").strip(),
                input_model=_forbid_extra(params[0]),
                execute=fn,
                risk=Risk(risk),
                idempotent=idempotent,
                requires_approval=requires_approval,
                timeout=timeout,
                schema_version=schema_version,
                paths=tuple(paths),
                subject=subject,
                transient=tuple(transient),
                retry_attempts=retry_attempts,
                retry_max_delay=retry_max_delay,
            )
        )
        return fn

    return register


def _forbid_extra(model: type[BaseModel]) -> type[BaseModel]:
    if model.model_config.get("extra") == "forbid":
        return model
    config = {**model.model_config, "extra": "forbid"}
    return type(model.__name__, (model,), {"model_config": config, "__module__": model.__module__})
