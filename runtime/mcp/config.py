"""The MCP servers file (`TOOLRUN_MCP_SERVERS_FILE`): which servers' tools the
registry offers, how to reach them, and whether their annotations are believed.

    {"servers": {
        "notes": {"command": ["python", "notes_server.py"], "trusted": true},
        "search": {"url": "https://mcp.example.com/mcp", "headers": {...}}}}

Claude's `.mcp.json` is read as Claude reads it: `mcpServers`, `command` plus
`args`, `${VAR}` and `${VAR:-default}` expanded from the environment in
`command`, `args`, `env`, `url`, `headers` and `cwd`. A server that cannot be
used (an unsupported transport such as `sse`, a variable that is not set and
has no default, a bad entry) is logged and left out, and the rest of the file
is still read; a key toolrun does not know (`disabled`, `autoApprove`) is a
warning. Only a file that cannot be read or is not a JSON object is an error.
A stdio server gets only the variables in `env` plus a safe few (PATH, HOME...),
never the worker's whole environment: secrets stay where they are.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runtime.errors import ConfigurationError

log = logging.getLogger("toolrun.mcp")
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
TRANSPORTS = ("stdio", "http", "streamable-http")
EXPANDED = ("command", "args", "env", "url", "headers", "cwd", "read_only")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ServerConfig(BaseModel):
    """One MCP server: a stdio `command` or a streamable HTTP `url`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: tuple[str, ...] | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    read_only: tuple[str, ...] = Field(
        (),
        description="Host paths a stdio server may read in the sandbox, beyond its own program "
        'files (docs/architecture.md, "The sandbox").',
    )
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    type: Literal["stdio", "http", "streamable-http"] | None = None
    trusted: bool = Field(
        False, description="Believe the server's readOnlyHint and other annotations."
    )
    timeout: float = Field(30.0, gt=0, description="Seconds a call or a listing may take.")
    startup_timeout: float = Field(
        30.0, gt=0, description="Seconds to start (or reach) the server and shake hands."
    )

    @model_validator(mode="before")
    @classmethod
    def _command_as_list(cls, data):
        if isinstance(data, dict) and isinstance(data.get("command"), str):
            data = {**data, "command": [data["command"]]}
        return data

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio) or 'url' (streamable HTTP)")
        if self.command is not None and not self.command:
            raise ValueError("'command' must name a program")
        return self

    @property
    def argv(self) -> list[str]:
        return [*(self.command or ()), *self.args]

    def key(self) -> str:
        """Identity of this configuration, to reuse what was discovered from it."""
        return self.model_dump_json()


def load_servers(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, ServerConfig]:
    """The usable servers a file names; a relative `cwd` is taken from the
    file's folder. A file that cannot be read is a `ConfigurationError` naming
    it; a server that cannot be used is logged and left out."""
    path = Path(path).expanduser()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigurationError(f"MCP servers file {path} does not exist") from None
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"MCP servers file {path} cannot be read: {error}") from error
    if not isinstance(data, dict):
        raise ConfigurationError(f"MCP servers file {path} must hold a JSON object")
    servers = data.get("mcpServers", data.get("servers", {}))
    unknown = sorted(set(data) - {"servers", "mcpServers"})
    if unknown:
        log.warning("MCP servers file %s: unknown key(s) %s ignored", path, unknown)
    if not isinstance(servers, dict):
        raise ConfigurationError(f"MCP servers file {path}: 'mcpServers' must be an object")
    usable = {}
    for name, entry in servers.items():
        try:
            usable[name] = _anchored(_server(name, entry, environ or os.environ), path.parent)
        except ValueError as error:
            log.error("MCP servers file %s: server %r left out: %s", path, name, error)
    return usable


def _server(name: str, entry: Any, environ: Mapping[str, str]) -> ServerConfig:
    if not SERVER_NAME.match(name):
        raise ValueError(f"server name {name!r} must match {SERVER_NAME.pattern}")
    if not isinstance(entry, dict):
        raise ValueError("a server must be a JSON object")
    kind = entry.get("type")
    if kind is not None and kind not in TRANSPORTS:
        raise ValueError(f"transport {kind!r} is not supported; use one of {', '.join(TRANSPORTS)}")
    unknown = sorted(set(entry) - set(ServerConfig.model_fields))
    if unknown:
        log.warning("MCP server %r: unknown key(s) %s ignored", name, unknown)
    known = {key: value for key, value in entry.items() if key in ServerConfig.model_fields}
    expanded = {k: _expand(v, environ) if k in EXPANDED else v for k, v in known.items()}
    try:
        return ServerConfig.model_validate(expanded)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, item['loc'])) or 'server'}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
        raise ValueError(problems) from None


def _expand(value: Any, environ: Mapping[str, str]) -> Any:
    """`${VAR}` and `${VAR:-default}` in every string of `value`, as Claude does."""
    if isinstance(value, list):
        return [_expand(item, environ) for item in value]
    if isinstance(value, dict):
        return {key: _expand(item, environ) for key, item in value.items()}
    if not isinstance(value, str):
        return value

    def one(match: re.Match) -> str:
        name, default = match[1], match[2]
        if name in environ:
            return environ[name]
        if default is None:
            raise ValueError(f"environment variable {name} is not set and has no default")
        return default

    return _VARIABLE.sub(one, value)


def _anchored(config: ServerConfig, folder: Path) -> ServerConfig:
    if config.cwd is None or Path(config.cwd).expanduser().is_absolute():
        return config
    return config.model_copy(update={"cwd": str((folder / config.cwd).resolve())})
