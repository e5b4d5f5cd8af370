"""OpenAI, both APIs.

Chat Completions: an assistant message's `tool_calls` in (`function.arguments`
is a JSON string, kept raw), one `role: "tool"` message per call out.
Responses: `function_call` output items in (`call_id`, `name`, `arguments`),
one `function_call_output` item per call out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.adapters import description, require, result_text
from runtime.registry.capabilities import CapabilitySpec
from runtime.types import ToolCall, ToolResult


def chat_calls(data: Any) -> list[ToolCall]:
    """The function calls of an assistant message, or of a chat completion
    with one choice."""
    require(isinstance(data, dict), "an OpenAI chat message must be an object")
    if "choices" in data:
        choices = data["choices"]
        require(
            isinstance(choices, list) and len(choices) == 1,
            "pass a chat completion with exactly one choice, or the choice's message",
        )
        data = choices[0].get("message") if isinstance(choices[0], dict) else None
        require(isinstance(data, dict), "the chat completion's choice has no message")
    require(
        data.get("role", "assistant") == "assistant",
        f"tool calls come in an 'assistant' message, not {data.get('role')!r}",
    )
    tool_calls = data.get("tool_calls") or []
    require(isinstance(tool_calls, list), "'tool_calls' must be a list")
    found = []
    for index, item in enumerate(tool_calls):
        if not isinstance(item, dict) or item.get("type", "function") != "function":
            continue
        function = item.get("function")
        require(
            isinstance(item.get("id"), str)
            and isinstance(function, dict)
            and isinstance(function.get("name"), str),
            f"tool call {index} needs a string 'id' and a 'function' with a string 'name'",
        )
        found.append(ToolCall(id=item["id"], name=function["name"], arguments=_raw(function)))
    return found


def responses_calls(data: Any) -> list[ToolCall]:
    """The `function_call` items of a response, of its `output` list, or a
    single item."""
    if isinstance(data, dict) and isinstance(data.get("output"), list):
        data = data["output"]
    if isinstance(data, dict):
        data = [data]
    require(isinstance(data, list), "Responses output must be a list of items")
    found = []
    for index, item in enumerate(data):
        if not isinstance(item, dict) or item.get("type") != "function_call":
            continue
        require(
            isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str),
            f"function_call item {index} needs a string 'call_id' and 'name'",
        )
        found.append(ToolCall(id=item["call_id"], name=item["name"], arguments=_raw(item)))
    return found


def chat_reply(results: Sequence[ToolResult]) -> list[dict[str, Any]]:
    return [
        {"role": "tool", "tool_call_id": result.call_id, "content": result_text(result)}
        for result in results
    ]


def responses_reply(results: Sequence[ToolResult]) -> list[dict[str, Any]]:
    return [
        {"type": "function_call_output", "call_id": result.call_id, "output": result_text(result)}
        for result in results
    ]


def chat_definition(spec: CapabilitySpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": description(spec),
            "parameters": spec.input_model.model_json_schema(),
        },
    }


def responses_definition(spec: CapabilitySpec) -> dict[str, Any]:
    """Not strict: strict mode needs every property required and no defaults,
    which the registry's input models do not promise."""
    return {
        "type": "function",
        "name": spec.name,
        "description": description(spec),
        "parameters": spec.input_model.model_json_schema(),
        "strict": False,
    }


def _raw(item: dict[str, Any]) -> Any:
    """`arguments` as sent: a string stays a string, so that JSON which does not
    parse becomes that call's `invalid_arguments` result, not a refused message."""
    return item.get("arguments")
