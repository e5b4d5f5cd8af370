"""Loading tools: the built-ins, the modules named in `TOOLRUN_TOOL_MODULES`, the
`toolrun.tools` entry points and the tools of MCP servers, on clients and
workers alike, so both hold the same registry."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from runtime.errors import ConfigurationError
from runtime.mcp.servers import register_servers
from runtime.registry.capabilities import Registry, registry

ENTRY_POINT_GROUP = "toolrun.tools"
BUILTIN_MODULE = "runtime.tools"


def load_tools(
    module_names: Iterable[str] = (), *, mcp_servers_file: Path | None = None
) -> Registry:
    """Import the built-ins, `module_names` (a deployment's `TOOLRUN_TOOL_MODULES`)
    and the `toolrun.tools` entry points, on clients and workers alike. Importing
    a module registers its tools. Then register the tools of the MCP servers in
    `mcp_servers_file` (a deployment's `TOOLRUN_MCP_SERVERS_FILE`), as
    `<server>__<tool>`. Callers pass both from the settings they were given."""
    for module_name in [BUILTIN_MODULE, *module_names]:
        try:
            importlib.import_module(module_name)
        except ImportError as error:
            raise ConfigurationError(
                f"cannot import tool module {module_name!r}: {error}"
            ) from error
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            point.load()
        except Exception as error:
            raise ConfigurationError(f"tool entry point {point.name!r} failed: {error}") from error
    if mcp_servers_file is not None:
        register_servers(mcp_servers_file, into=registry)
    return registry
