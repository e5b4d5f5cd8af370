"""OpenAI Chat Completions and Responses in and out, checked against the official
SDK's types (no network)."""

from __future__ import annotations

import json

import pytest
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessage,
    ChatCompletionMessageParam,
    ChatCompletionToolMessageParam,
)
from openai.types.responses import (
    FunctionToolParam,
    ResponseFunctionToolCall,
    ResponseInputItemParam,
    ResponseReasoningItem,
)
from openai.types.responses.response_input_item_param import FunctionCallOutput

from runtime import adapters
from runtime.errors import InvalidBatch
from runtime.registry.validation import Invalid, validate
from runtime.results import formatter as results
from runtime.tools.loading import load_tools
from runtime.types import Status
from tests.adapters.test_anthropic import same_after_validation


def chat_message(*calls: tuple[str, str, str]) -> ChatCompletionMessage:
    return ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ],
        }
    )


def function_call(call_id: str, name: str, arguments: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall.model_validate(
        {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": "completed",
        }
    )


@pytest.fixture(scope="module")
def registry():
    return load_tools(["tests.support.tools"], mcp_servers_file=None)


def test_chat_tool_calls_become_calls_with_arguments_kept_raw():
    sdk = chat_message(
        ("call_1", "read_file", json.dumps({"path": "a.txt"})),
        ("call_2", "list_dir", "{}"),
    )
    turn = adapters.parse(sdk)
    assert turn.format == "openai"
    assert [(c.id, c.name, c.arguments) for c in turn.calls] == [
        ("call_1", "read_file", '{"path": "a.txt"}'),
        ("call_2", "list_dir", "{}"),
    ]


def test_a_chat_completion_with_one_choice_is_read_through_its_message():
    completion = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "gpt-4.1",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": chat_message(("call_1", "nap", '{"label": "x"}')).model_dump(),
                }
            ],
        }
    )
    assert [c.id for c in adapters.parse(completion).calls] == ["call_1"]
    two = completion.model_dump(mode="json")
    two["choices"] *= 2
    with pytest.raises(InvalidBatch, match="exactly one choice"):
        adapters.parse(two)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"path": ', "not JSON"),
        ("[1, 2]", "got a list"),
        ('"a.txt"', "got a string"),
        ("{}", "path: is required"),
        ('{"path": 3}', "path: must be a string (got a number)"),
    ],
)
def test_bad_argument_strings_are_that_calls_invalid_arguments_with_a_fixable_message(
    registry, raw, expected
):
    [call] = adapters.parse(chat_message(("call_1", "read_file", raw))).calls
    outcome = validate(registry.get(call.name).input_model, call.arguments)
    assert isinstance(outcome, Invalid)
    assert expected in outcome.message


def test_chat_reply_is_one_tool_message_per_call_and_the_conversation_is_valid():
    sdk = chat_message(("call_1", "nap", '{"label": "a"}'), ("call_2", "ghost", "{}"))
    turn = adapters.parse(sdk)
    done = [
        results.success("call_1", "nap", {"label": "a"}, max_bytes=4096),
        results.failure("call_2", "ghost", Status.unknown_tool, "unknown tool 'ghost'"),
    ]
    reply = adapters.reply(turn.format, done)
    assert [m["tool_call_id"] for m in reply] == ["call_1", "call_2"]
    for item in reply:
        assert same_after_validation(ChatCompletionToolMessageParam, item)
    assert reply[1]["content"] == "ghost: unknown tool 'ghost'"
    conversation = [
        {"role": "user", "content": "nap, then ghost"},
        sdk.model_dump(exclude_none=True),
        *reply,
    ]
    assert same_after_validation(list[ChatCompletionMessageParam], conversation)


def test_responses_function_calls_become_calls_and_other_items_are_ignored():
    reasoning = ResponseReasoningItem.model_validate(
        {"type": "reasoning", "id": "rs_1", "summary": []}
    )
    output = [
        reasoning,
        function_call("call_a", "read_file", '{"path": "a"}'),
        function_call("call_b", "nap", "not json"),
    ]
    turn = adapters.parse(output)
    assert turn.format == "responses"
    assert [(c.id, c.name, c.arguments) for c in turn.calls] == [
        ("call_a", "read_file", '{"path": "a"}'),
        ("call_b", "nap", "not json"),
    ]
    assert adapters.parse({"object": "response", "output": output}).calls == turn.calls
    assert adapters.parse(output[1]).calls == turn.calls[:1]


def test_responses_reply_is_function_call_output_items():
    done = [
        results.success("call_a", "read_file", "text", max_bytes=4096),
        results.failure("call_b", "nap", Status.invalid_arguments, "invalid arguments: ..."),
    ]
    reply = adapters.reply("responses", done)
    assert [(i["type"], i["call_id"]) for i in reply] == [
        ("function_call_output", "call_a"),
        ("function_call_output", "call_b"),
    ]
    for item in reply:
        assert same_after_validation(FunctionCallOutput, item)
        assert same_after_validation(ResponseInputItemParam, item)


def test_tool_definitions_are_valid_for_both_apis(registry):
    chat = adapters.definitions(registry, "openai")
    responses = adapters.definitions(registry, "responses")
    assert [d["function"]["name"] for d in chat] == [d["name"] for d in responses]
    for chat_tool, response_tool in zip(chat, responses, strict=True):
        assert same_after_validation(ChatCompletionFunctionToolParam, chat_tool)
        assert same_after_validation(FunctionToolParam, response_tool)
        spec = registry.get(response_tool["name"])
        assert response_tool["parameters"] == spec.input_model.model_json_schema()
        assert chat_tool["function"]["parameters"] == response_tool["parameters"]


def test_the_format_is_detected_or_refused():
    assert adapters.detect({"role": "assistant", "content": "hi"}) == "openai"
    assert adapters.detect([{"type": "function_call"}]) == "responses"
    assert adapters.detect([{"type": "tool_use"}]) == "anthropic"
    with pytest.raises(InvalidBatch, match="cannot tell the provider"):
        adapters.parse({"hello": "world"})
    with pytest.raises(InvalidBatch, match="unknown format"):
        adapters.parse([], "gemini")
