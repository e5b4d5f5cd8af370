"""What every provider format shares: SDK objects as JSON, the text a result
gives the model, a tool's description, and the one way a malformed message is
refused."""

from __future__ import annotations

import inspect
from typing import Any

from runtime.errors import InvalidBatch
from runtime.registry import argument_limits
from runtime.registry.capabilities import CapabilitySpec
from runtime.types import ToolResult

# A message's own envelope (content list, block, input) around arguments that
# may nest up to the limit admission gives an `invalid_arguments` result past.
MAX_DEPTH = argument_limits.MAX_DEPTH + 16


def plain(message: Any) -> Any:
    """An SDK object (pydantic) as its JSON; JSON as it is. A message nested
    deeper than any provider's is `InvalidBatch`, found without recursion
    before anything recurses into it."""
    if hasattr(message, "model_dump"):
        message = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    pending = [(message, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict | list | tuple):
            if depth > MAX_DEPTH:
                raise InvalidBatch(
                    f"the message nests deeper than {MAX_DEPTH} levels; no tool call needs that"
                )
            items = value.values() if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
    return _plain(message)


def _plain(message: Any) -> Any:
    if hasattr(message, "model_dump"):
        return message.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(message, list | tuple):
        return [_plain(item) for item in message]
    if isinstance(message, dict):
        return {key: _plain(value) for key, value in message.items()}
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


def model_usage(data: Any) -> dict[str, Any] | None:
    """The model's tokens of a provider response that carries `usage` (an
    Anthropic message, a chat completion, a Responses response), and its model;
    None for a bare message or item list (docs/architecture.md, "Usage and budgets")."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return None

    def count(*names: str) -> int | None:
        found = next((usage[n] for n in names if isinstance(usage.get(n), int)), None)
        return None if isinstance(found, bool) else found

    model = data.get("model")
    return {
        "model": model[:200] if isinstance(model, str) else None,
        "input_tokens": count("input_tokens", "prompt_tokens"),
        "output_tokens": count("output_tokens", "completion_tokens"),
    }
