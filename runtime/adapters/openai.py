"""OpenAI, both APIs.

Chat Completions: an assistant message's `tool_calls` in (`function.arguments`
is a JSON string, kept raw), one `role: "tool"` message per call out.
Responses: `function_call` output items in (`call_id`, `name`, `arguments`),
one `function_call_output` item per call out.

Calls of other kinds that the client must answer (a chat `custom` tool call; a
Responses `custom_tool_call`, `local_shell_call`, `shell_call`,
`apply_patch_call` or `mcp_approval_request`) are read as calls of that kind:
toolrun does not run them, but answers each with the item its kind needs,
carrying an error, because the next request is refused while any call is
unanswered. (A `computer_call` needs a screenshot as its answer, which toolrun
cannot make: it is left to the orchestrator.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.adapters.common import description, require, result_text
from runtime.registry.capabilities import CapabilitySpec
from runtime.results import media
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
        if not isinstance(item, dict):
            continue
        if item.get("type", "function") != "function":
            found.append(_foreign(index, item, item.get("type"), item.get("id"), "custom"))
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
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in RESPONSES_FOREIGN:
            call_id = item.get("id" if kind == "mcp_approval_request" else "call_id")
            found.append(_foreign(index, item, kind, call_id, RESPONSES_FOREIGN[kind]))
            continue
        if kind != "function_call":
            continue
        require(
            isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str),
            f"function_call item {index} needs a string 'call_id' and 'name'",
        )
        found.append(ToolCall(id=item["call_id"], name=item["name"], arguments=_raw(item)))
    return found


def chat_reply(results: Sequence[ToolResult], kinds: dict[str, str]) -> list[dict[str, Any]]:
    """One `tool` message per call, whatever its kind (custom calls are answered
    the same way). A tool message carries text only: a result's images and
    documents are named in a note instead."""
    return [
        {"role": "tool", "tool_call_id": result.call_id, "content": _chat_text(result)}
        for result in results
    ]


def _chat_text(result: ToolResult) -> str:
    text = result_text(result)
    if not result.media:
        return text
    return f"{text}\n{media.note(result.media, 'Chat Completions tool messages')}"


def responses_reply(results: Sequence[ToolResult], kinds: dict[str, str]) -> list[dict[str, Any]]:
    """One item per call, of the type its call's kind is answered with."""
    return [_responses_item(kinds.get(result.call_id, "function"), result) for result in results]


def _responses_item(kind: str, result: ToolResult) -> dict[str, Any]:
    text, call_id = result_text(result), result.call_id
    if result.media and kind == "function":  # images and files as input content
        return {"type": "function_call_output", "call_id": call_id, "output": _inputs(result)}
    if kind == "custom_tool_call":
        return {"type": "custom_tool_call_output", "call_id": call_id, "output": text}
    if kind == "local_shell_call":
        return {"type": "local_shell_call_output", "id": call_id, "output": text}
    if kind == "shell_call":
        failed = {"stdout": "", "stderr": text, "outcome": {"type": "exit", "exit_code": 1}}
        return {"type": "shell_call_output", "call_id": call_id, "output": [failed]}
    if kind == "apply_patch_call":
        return {
            "type": "apply_patch_call_output",
            "call_id": call_id,
            "status": "failed",
            "output": text,
        }
    if kind == "mcp_approval_request":
        return {
            "type": "mcp_approval_response",
            "approval_request_id": call_id,
            "approve": False,
            "reason": text,
        }
    return {"type": "function_call_output", "call_id": call_id, "output": text}


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


def _inputs(result: ToolResult) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"type": "input_text", "text": result_text(result)}]
    for item in result.media:
        url = f"data:{item.mime_type};base64,{item.data}"
        if item.kind == "image":
            items.append({"type": "input_image", "image_url": url, "detail": "auto"})
        else:
            items.append(
                {"type": "input_file", "file_data": url, "filename": item.name or "document.pdf"}
            )
    return items


# Responses items the client must answer, and what a call of each is named.
RESPONSES_FOREIGN = {
    "custom_tool_call": None,
    "local_shell_call": "local_shell",
    "shell_call": "shell_call",
    "apply_patch_call": "apply_patch",
    "mcp_approval_request": None,
}


def _foreign(index: int, item: dict, kind: Any, call_id: Any, name: str | None) -> ToolCall:
    """A call of a kind toolrun does not run, kept so that it gets its reply."""
    require(isinstance(call_id, str), f"{kind} item {index} needs a string id")
    custom = item.get("custom") if isinstance(item.get("custom"), dict) else item
    named = custom.get("name") if isinstance(custom.get("name"), str) else None
    if kind == "mcp_approval_request" and named:
        named = f"{item.get('server_label', '?')}.{named}"
    return ToolCall(id=call_id, name=named or name or str(kind), arguments=None, kind=str(kind))


def _raw(item: dict[str, Any]) -> Any:
    """`arguments` as sent: a string stays a string, so that JSON which does not
    parse becomes that call's `invalid_arguments` result, not a refused message."""
    return item.get("arguments")
