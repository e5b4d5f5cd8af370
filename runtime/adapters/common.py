"""What every provider format shares: SDK objects as JSON, the text a result
gives the model, a tool's description, and the one way a malformed message is
refused."""

from __future__ import annotations

import inspect
from typing import Any

from runtime.errors import InvalidBatch
from runtime.registry.capabilities import CapabilitySpec
from runtime.types import ToolResult


def plain(message: Any) -> Any:
    """An SDK object (pydantic) as its JSON; JSON as it is."""
    if hasattr(message, "model_dump"):
        return message.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(message, list | tuple):
        return [plain(item) for item in message]
    if isinstance(message, dict):
        return {key: plain(value) for key, value in message.items()}
    return message


def result_text(result: ToolResult) -> str:
    """The text the model reads for a result; never empty (some providers
    refuse an empty tool result)."""
    return result.model_message or "(no output)"


def description(spec: CapabilitySpec) -> str:
    """The tool's description with its docstring indentation removed."""
    return inspect.cleandoc(spec.description)


def require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidBatch(message)
