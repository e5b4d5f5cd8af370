"""The MCP servers file (`TOOLRUN_MCP_SERVERS_FILE`): which servers' tools the
registry offers, how to reach them, and whether their annotations are believed.

    {"servers": {
        "notes": {"command": ["python", "notes_server.py"], "trusted": true},
        "search": {"url": "https://mcp.example.com/mcp", "headers": {...}}}}

Claude's `.mcp.json` shape (`mcpServers`, `command` plus `args`) is read too.
A stdio server gets only the variables in `env` plus a safe few (PATH, HOME...),
never the worker's whole environment: secrets stay where they are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from runtime.errors import ConfigurationError

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


class ServerConfig(BaseModel):
    """One MCP server: a stdio `command` or a streamable HTTP `url`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: tuple[str, ...] | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
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


class ServersFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: dict[str, ServerConfig] = Field(
        default_factory=dict, validation_alias=AliasChoices("servers", "mcpServers")
    )


def load_servers(path: Path) -> dict[str, ServerConfig]:
    """The servers a file names; a relative `cwd` is taken from the file's folder.
    Anything wrong is a `ConfigurationError` naming the file."""
    path = Path(path).expanduser()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigurationError(f"MCP servers file {path} does not exist") from None
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"MCP servers file {path} cannot be read: {error}") from error
    try:
        servers = ServersFile.model_validate(data).servers
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, item['loc']))}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
        raise ConfigurationError(f"MCP servers file {path}: {problems}") from error
    for name in servers:
        if not SERVER_NAME.match(name):
            raise ConfigurationError(
                f"MCP servers file {path}: server name {name!r} must match {SERVER_NAME.pattern}"
            )
    return {name: _anchored(config, path.parent) for name, config in servers.items()}


def _anchored(config: ServerConfig, folder: Path) -> ServerConfig:
    if config.cwd is None or Path(config.cwd).expanduser().is_absolute():
        return config
    return config.model_copy(update={"cwd": str((folder / config.cwd).resolve())})
