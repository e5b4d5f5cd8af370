"""Provider formats in and out: the model's message as the provider returned it →
tool calls; results → exactly what to send the model next; the registry → tool
definitions the model can be given.

    turn = parse(message)                      # format detected, or format="openai"
    handle = rt.submit(turn.calls, mode="auto")
    next_message = reply(turn.format, handle.results())

Arguments stay raw: a string that is not JSON, or JSON that is not an object,
becomes an `invalid_arguments` result for that call only, never a refused
message. Only function tools are ours; other calls the client must answer
(custom tools, Responses shell or patch calls) get an error result each, and
items nobody answers (text, thinking, reasoning, server-side tool calls) are
ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from runtime.adapters import anthropic, mcp, openai
from runtime.adapters.common import description, model_usage, plain, require, result_text
from runtime.errors import InvalidBatch
from runtime.gate.permissions import offered
from runtime.gate.policy import Policy, PolicySources
from runtime.registry.capabilities import CapabilitySpec
from runtime.settings import Settings
from runtime.types import Mode, ToolCall, ToolResult

__all__ = [
    "definitions",
    "description",
    "detect",
    "parse",
    "plain",
    "reply",
    "require",
    "result_text",
]


Format = Literal["anthropic", "openai", "responses"]
DefinitionFormat = Literal["anthropic", "openai", "responses", "mcp"]
FORMATS: tuple[str, ...] = get_args(Format)
DEFINITION_FORMATS: tuple[str, ...] = get_args(DefinitionFormat)

_ANTHROPIC_BLOCKS = {"tool_use", "text", "thinking", "redacted_thinking", "server_tool_use"}
_RESPONSES_ITEMS = {
    "function_call",
    "reasoning",
    "message",
    "custom_tool_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
    "mcp_approval_request",
}


@dataclass(frozen=True)
class ModelTurn:
    """The tool calls of one model message, and the dialect to answer in."""

    format: Format
    calls: list[ToolCall]
    # The model and its tokens, when the message is a whole response carrying `usage`.
    usage: dict[str, Any] | None = None


def parse(message: Any, format: Format | None = None) -> ModelTurn:
    """The calls of a provider message (an SDK object or its JSON), in the
    model's order. `format` is detected when not given; a message that is
    none of the three is `InvalidBatch`."""
    data = plain(message)
    chosen = format or detect(data)
    if chosen not in FORMATS:
        raise InvalidBatch(f"unknown format {chosen!r}; use one of {', '.join(FORMATS)}")
    reader = {
        "anthropic": anthropic.calls,
        "openai": openai.chat_calls,
        "responses": openai.responses_calls,
    }[chosen]
    return ModelTurn(chosen, reader(data), model_usage(data))


def reply(
    format: Format, results: Sequence[ToolResult], kinds: dict[str, str] | None = None
) -> Any:
    """What to send the model next, in `format`: one Anthropic `user` message,
    or a list of OpenAI `tool` messages, or a list of Responses output items
    (`function_call_output`, or what another kind of call is answered with,
    by `kinds`: call id → `ToolCall.kind`); one entry per result, in order."""
    writers = {
        "anthropic": anthropic.reply,
        "openai": openai.chat_reply,
        "responses": openai.responses_reply,
    }
    if format not in writers:
        raise InvalidBatch(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    return writers[format](results, kinds or {})


def definitions(
    specs: Iterable[CapabilitySpec],
    format: DefinitionFormat,
    *,
    mode: Mode | str | None = None,
    workspace: str | Path | None = None,
    policy: Policy | None = None,
    settings: Settings | None = None,
) -> list[dict]:
    """The registry's tools as `format` tool definitions, so the model is given
    the same tools, with the same input schemas, that the registry accepts.

    With `mode`, only the tools that can run in that mode are offered: under
    `policy`, or the policy of `workspace` under `settings` (its trust and the
    settings files' rules: a `Runtime`'s `rt.settings`), else as in a trusted
    workspace without rules. A tool the gate would refuse whatever its
    arguments is left out; one that would ask stays, except in `auto`, where
    nobody can answer."""
    makers = {
        "anthropic": anthropic.definition,
        "openai": openai.chat_definition,
        "responses": openai.responses_definition,
        "mcp": mcp.definition,
    }
    if format not in makers:
        raise InvalidBatch(f"unknown format {format!r}; use one of {', '.join(DEFINITION_FORMATS)}")
    if mode is not None:
        if policy is None and workspace is not None:
            if settings is None:
                raise TypeError(
                    "definitions(workspace=...) needs the settings whose files "
                    "decide its trust and rules: settings=rt.settings"
                )
            policy = PolicySources(settings).policy_for(Path(workspace))
        specs = [spec for spec in specs if offered(spec, Mode(mode), policy)]
    return [makers[format](spec) for spec in specs]


def detect(data: Any) -> Format:
    """Which provider a message came from, by its shape."""
    if isinstance(data, dict):
        if "choices" in data or "tool_calls" in data:
            return "openai"
        if data.get("object") == "response" or isinstance(data.get("output"), list):
            return "responses"
        if data.get("type") in _RESPONSES_ITEMS - {"message"}:
            return "responses"
        content = data.get("content")
        if isinstance(content, list) and _types(content) & _ANTHROPIC_BLOCKS:
            return "anthropic"
        if isinstance(content, list) and data.get("type") == "message":
            return "responses" if "output_text" in _types(content) else "anthropic"
        if data.get("role") == "assistant" and not isinstance(content, list):
            return "openai"
    elif isinstance(data, list):
        kinds = _types(data)
        if kinds & {"tool_use", "server_tool_use", "thinking", "redacted_thinking"}:
            return "anthropic"
        if kinds & _RESPONSES_ITEMS - {"message"}:
            return "responses"
        if kinds == {"text"}:
            return "anthropic"
        if kinds == {"message"}:
            return "responses"
    raise InvalidBatch(
        "cannot tell the provider of this message; expected an Anthropic assistant message "
        "or its content list, an OpenAI chat completion message, or Responses output items "
        f"(or pass the format: {', '.join(FORMATS)})"
    )


def _types(items: list) -> set[str]:
    return {item.get("type") for item in items if isinstance(item, dict)} - {None}
