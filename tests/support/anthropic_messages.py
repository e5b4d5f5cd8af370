"""Anthropic assistant messages that call tools, typed by the official SDK, as a
model would send them to toolrun."""

from __future__ import annotations

from anthropic.types import Message


def anthropic_message(*blocks: dict) -> Message:
    """An assistant turn that stopped for tool use, holding `blocks` in order."""
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": list(blocks),
        }
    )


def tool_use(call_id: str, name: str, **arguments) -> dict:
    """A `tool_use` block: the model calls `name` with `arguments`."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
