"""MCP both ways: the registry's tools as MCP tool definitions, and the tools of
configured MCP servers registered as `<server>__<tool>` capabilities.

Annotations are hints, never grants. A server's `readOnlyHint` makes its tool
`read` (parallel, allowed in plan mode) only when the servers file lists the
server as `trusted`; `destructiveHint`, `openWorldHint` and `idempotentHint`
likewise count only for a trusted server. Every tool of an untrusted server has
unknown risk: ordered, and asked about (denied where nobody can answer).

`load_tools` calls `register_servers` on clients and workers alike, so both
know the same tools. A server that cannot be listed at that moment is logged
and left out (its tools are then unknown to this process); a server that fails
later fails only the calls made to it.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from runtime.registry.capabilities import CapabilitySpec, Registry
from runtime.types import Risk

log = logging.getLogger("toolrun.mcp")
SEPARATOR = "__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_discovered: dict[tuple[str, str], list[CapabilitySpec]] = {}


def risk_of(annotations: Any, *, trusted: bool) -> tuple[Risk, bool]:
    """(risk, idempotent) of a server's tool. Absent hints take MCP's defaults
    (not read-only, destructive, not idempotent, open world); a tool that says
    nothing at all, or whose server is not trusted, has unknown risk."""
    if not trusted or not isinstance(annotations, dict):
        return Risk.unknown, False

    def hint(name: str, default: bool) -> bool:
        value = annotations.get(name)
        return value if isinstance(value, bool) else default

    if not any(isinstance(annotations.get(name), bool) for name in _HINTS):
        return Risk.unknown, False
    if hint("readOnlyHint", False):
        return Risk.read, True
    idempotent = hint("idempotentHint", False)
    if hint("destructiveHint", True):
        return Risk.destructive, idempotent
    if hint("openWorldHint", True):
        return Risk.external, idempotent
    return Risk.write, idempotent


def register_servers(path: Path, *, into: Registry) -> list[CapabilitySpec]:
    """Register the tools of every server in the servers file at `path`.

    What a server listed is remembered per configuration, so loading the same
    file again (another `Runtime` in this process) registers the same specs.
    """
    from runtime.mcp.config import load_servers

    servers = load_servers(path)
    pending = [(n, c) for n, c in servers.items() if (n, c.key()) not in _discovered]
    for name, specs in _discover(pending).items():
        _discovered[(name, servers[name].key())] = specs
    registered = []
    for name, config in servers.items():
        for spec in _discovered.get((name, config.key()), []):
            registered.append(into.register(spec))
    return registered


def tool_name(server: str, remote: str) -> str:
    """`<server>__<tool>`, made to fit the registry's ^[A-Za-z0-9_-]{1,64}$."""
    name = f"{server}{SEPARATOR}{_UNSAFE.sub('_', remote)}"
    if len(name) <= 64 and name == f"{server}{SEPARATOR}{remote}":
        return name
    digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
    return f"{name[:55]}_{digest}"


def specs_for(
    server: str, config, tools: list[dict[str, Any]], *, asks_roots: bool = False
) -> list[CapabilitySpec]:
    """Capability specs for the tools a server listed (MCP JSON)."""
    from runtime.mcp.paths import path_fields
    from runtime.mcp.schema import input_model
    from runtime.mcp.session import STOP_GRACE, RemoteTool

    specs: dict[str, CapabilitySpec] = {}
    for tool in tools:
        remote = tool.get("name")
        if not isinstance(remote, str) or not remote:
            continue
        name = tool_name(server, remote)
        if name in specs:
            log.warning("MCP server %r: tools collide as %r; %r left out", server, name, remote)
            continue
        risk, idempotent = risk_of(tool.get("annotations"), trusted=config.trusted)
        model = input_model(name, tool.get("inputSchema"))
        specs[name] = CapabilitySpec(
            name=name,
            description=tool.get("description") or f"Tool {remote!r} of MCP server {server!r}.",
            input_model=model,
            paths=(paths := path_fields(model, tool.get("inputSchema"))),
            execute=RemoteTool(server, config, remote, asks_roots, paths),
            risk=risk,
            idempotent=idempotent,
            timeout=config.startup_timeout + config.timeout + STOP_GRACE,
            host=urlsplit(config.url).hostname if config.url else None,  # rates per host
        )
    return list(specs.values())


def _discover(pending: list) -> dict[str, list[CapabilitySpec]]:
    from concurrent.futures import ThreadPoolExecutor

    from runtime.errors import ToolError
    from runtime.mcp.session import discover

    def one(item) -> tuple[str, list[CapabilitySpec] | None]:
        name, config = item
        try:
            listing = discover(name, config)
            return name, specs_for(name, config, listing.tools, asks_roots=listing.asks_roots)
        except ToolError as error:
            log.warning("MCP server %r left out: %s", name, error)
            return name, None

    if not pending:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(pending))) as pool:
        found = dict(pool.map(one, pending))
    return {name: specs for name, specs in found.items() if specs is not None}
