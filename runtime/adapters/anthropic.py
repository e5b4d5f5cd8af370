"""Anthropic Messages: `tool_use` blocks in, one `user` message of `tool_result`
blocks out, in the order of the `tool_use` blocks (the API refuses a turn in
which a `tool_use` has no `tool_result`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.adapters.common import description, require, result_text
from runtime.registry.capabilities import CapabilitySpec
from runtime.types import ToolCall, ToolResult


def calls(data: Any) -> list[ToolCall]:
    """The `tool_use` blocks of an assistant message, of its `content` list, or
    a single block. Text, thinking and server-side tool blocks are not ours."""
    if isinstance(data, dict) and data.get("type") == "tool_use":
        data = [data]
    if isinstance(data, dict):
        role = data.get("role", "assistant")
        require(role == "assistant", f"tool_use blocks come in role 'assistant', not {role!r}")
        data = data.get("content")
    require(isinstance(data, list), "an Anthropic message needs a 'content' list of blocks")
    found = []
    for index, block in enumerate(data):
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            continue
        require(
            isinstance(block.get("id"), str) and isinstance(block.get("name"), str),
            f"tool_use block {index} needs a string 'id' and 'name'",
        )
        found.append(ToolCall(id=block["id"], name=block["name"], arguments=block.get("input")))
    return found


def reply(results: Sequence[ToolResult], kinds: dict[str, str]) -> dict[str, Any]:
    """One `user` message: a `tool_result` per result, `is_error` for every
    status but ok; a result's images and documents follow its text as
    `image` and `document` blocks."""
    return {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": result.call_id,
                "content": _content(result),
                "is_error": not result.ok,
            }
            for result in results
        ],
    }


def _content(result: ToolResult) -> str | list[dict[str, Any]]:
    if not result.media:
        return result_text(result)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": result_text(result)}]
    for item in result.media:
        source = {"type": "base64", "media_type": item.mime_type, "data": item.data}
        blocks.append({"type": item.kind, "source": source})
    return blocks


def definition(spec: CapabilitySpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": description(spec),
        "input_schema": spec.input_model.model_json_schema(),
    }
