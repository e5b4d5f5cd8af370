"""Tool definitions in MCP's own format (`toolrun tools --format mcp`): what
the runtime knows of each tool, said as MCP annotations."""

from __future__ import annotations

from typing import Any

from runtime.adapters.common import description
from runtime.registry.capabilities import CapabilitySpec
from runtime.types import Risk


def definition(spec: CapabilitySpec) -> dict[str, Any]:
    """A registry tool as an MCP `Tool`, its annotations derived from its risk."""
    return {
        "name": spec.name,
        "description": description(spec),
        "inputSchema": spec.input_model.model_json_schema(),
        "annotations": annotations_for(spec.risk, spec.idempotent),
    }


def annotations_for(risk: Risk, idempotent: bool) -> dict[str, bool]:
    """What the runtime knows of a tool, said as MCP hints. Unknown risk says
    the most cautious thing (the hints' own defaults)."""
    if risk is Risk.read:
        return {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        }
    return {
        "readOnlyHint": False,
        "destructiveHint": risk in (Risk.destructive, Risk.unknown),
        "idempotentHint": idempotent and risk is not Risk.unknown,
        "openWorldHint": risk in (Risk.external, Risk.unknown),
    }
