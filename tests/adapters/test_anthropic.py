"""Anthropic Messages in and out, checked against the official SDK's types (no network)."""

from __future__ import annotations

import pytest
from anthropic.types import MessageParam, ToolParam
from pydantic import TypeAdapter

from runtime import adapters
from runtime.errors import InvalidBatch
from runtime.results import formatter as results
from runtime.tools.loading import load_tools
from runtime.types import Status
from tests.support.anthropic_messages import anthropic_message, tool_use

NON_OK = [status for status in Status if status is not Status.ok]


def same_after_validation(schema, value) -> bool:
    """`value` is valid for the SDK type (a TypedDict of the SDK's params, or a
    model) and carries nothing that the type drops."""
    adapter = TypeAdapter(schema)  # alive while the lazy iterables are walked
    return _materialized(adapter.validate_python(value)) == value


def _materialized(value):
    """pydantic validates an `Iterable[...]` field lazily; walk it."""
    if isinstance(value, dict):
        return {key: _materialized(item) for key, item in value.items()}
    if isinstance(value, list | tuple) or hasattr(value, "__next__"):
        return [_materialized(item) for item in value]
    return value


def test_tool_use_blocks_become_calls_in_order_and_text_is_ignored():
    sdk = anthropic_message(
        {"type": "text", "text": "Reading both."},
        tool_use("toolu_01", "read_file", path="a.txt"),
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        tool_use("toolu_02", "list_dir", path="."),
    )
    turn = adapters.parse(sdk)
    assert turn.format == "anthropic"
    assert [(c.id, c.name, c.arguments) for c in turn.calls] == [
        ("toolu_01", "read_file", {"path": "a.txt"}),
        ("toolu_02", "list_dir", {"path": "."}),
    ]


@pytest.mark.parametrize(
    "shape",
    [
        lambda m: m,
        lambda m: m.model_dump(mode="json"),
        lambda m: m.content,
        lambda m: [block.model_dump(mode="json") for block in m.content],
        lambda m: {"role": "assistant", "content": [b.model_dump() for b in m.content]},
    ],
    ids=["sdk-message", "message-json", "sdk-content", "content-json", "message-param"],
)
def test_every_shape_of_the_message_is_detected(shape):
    sdk = anthropic_message(tool_use("toolu_01", "read_file", path="a.txt"))
    turn = adapters.parse(shape(sdk))
    assert turn.format == "anthropic"
    assert [c.id for c in turn.calls] == ["toolu_01"]


def test_server_side_tool_blocks_are_not_ours():
    blocks = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        tool_use("toolu_01", "read_file", path="a"),
    ]
    assert [c.id for c in adapters.parse(blocks).calls] == ["toolu_01"]


def test_a_user_message_or_a_block_without_an_id_is_refused():
    with pytest.raises(InvalidBatch, match="role 'assistant', not 'user'"):
        adapters.parse({"role": "user", "content": [tool_use("t", "x")]}, "anthropic")
    with pytest.raises(InvalidBatch, match="tool_use block 0"):
        adapters.parse([{"type": "tool_use", "name": "x", "input": {}}], "anthropic")


def test_reply_is_one_user_message_of_tool_results_in_order_with_is_error_for_non_ok():
    done = [
        results.success("toolu_02", "list_dir", "a.txt\nb.txt", max_bytes=4096),
        *[results.failure(f"toolu_{s.value}", "read_file", s, f"{s.value} here") for s in NON_OK],
    ]
    reply = adapters.reply("anthropic", done)
    assert same_after_validation(MessageParam, reply)
    assert reply["role"] == "user"
    blocks = reply["content"]
    assert [b["tool_use_id"] for b in blocks] == [r.call_id for r in done]
    assert [b["is_error"] for b in blocks] == [False] + [True] * len(NON_OK)
    assert blocks[0]["content"] == "a.txt\nb.txt"
    assert blocks[1]["content"] == done[1].model_message


def test_the_next_turn_is_a_valid_conversation():
    sdk = anthropic_message(
        {"type": "text", "text": "Let me check."}, tool_use("toolu_01", "nap", label="x")
    )
    turn = adapters.parse(sdk)
    done = [results.success(c.id, c.name, {"ok": True}, max_bytes=4096) for c in turn.calls]
    conversation = [
        {"role": "user", "content": "Take a nap."},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in sdk.content]},
        adapters.reply("anthropic", done),
    ]
    assert same_after_validation(list[MessageParam], conversation)


def test_an_empty_model_message_is_not_sent_empty():
    done = [results.success("toolu_01", "nap", "", max_bytes=4096)]
    assert adapters.reply("anthropic", done)["content"][0]["content"] == "(no output)"


def test_tool_definitions_are_valid_tool_params_with_the_registry_schema():
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    definitions = adapters.definitions(registry, "anthropic")
    assert [d["name"] for d in definitions] == registry.names()
    for definition in definitions:
        assert same_after_validation(ToolParam, definition)
        spec = registry.get(definition["name"])
        assert definition["input_schema"] == spec.input_model.model_json_schema()
    read_file = next(d for d in definitions if d["name"] == "read_file")
    assert "path" in read_file["input_schema"]["properties"]
    assert not read_file["description"].startswith(" ")


@pytest.mark.parametrize("depth", [500, 900, 100_000])
def test_a_message_nested_past_any_provider_is_refused_without_recursion(depth):
    arguments: dict = {}
    for _ in range(depth):
        arguments = {"a": arguments}
    message = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "read_file", "input": arguments}],
    }
    with pytest.raises(InvalidBatch, match="nests deeper"):
        adapters.parse(message)
