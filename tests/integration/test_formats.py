"""Provider messages end to end against the session's real stack: an SDK-typed
message in, the reply to send the model out, valid for the SDK's param types;
the same through `toolrun run --format`; and 50 batches streamed at once on
one event loop."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from anthropic.types import MessageParam, ToolParam
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessage,
    ChatCompletionToolMessageParam,
)
from openai.types.responses import (
    FunctionToolParam,
    ResponseFunctionToolCall,
    ResponseInputItemParam,
    ResponseOutputItem,
)
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter

from runtime.types import Status
from tests.adapters.test_anthropic import same_after_validation
from tests.conftest import TEST_TOOLS
from tests.support.anthropic_messages import anthropic_message, tool_use
from tests.support.cli import assert_one_line_error, stack_env, toolrun, toolrun_env

pytestmark = pytest.mark.timeout(120)
WRITES = {"allow": ["write_file"]}


def test_an_anthropic_turn_gets_one_tool_result_per_tool_use_in_order(runtime, workspace):
    message = anthropic_message(
        {"type": "text", "text": "Writing, then reading back."},
        tool_use("toolu_1", "nap", label="first", seconds=0.3),
        tool_use("toolu_2", "write_file", path="a.txt", content="hello"),
        tool_use("toolu_3", "read_file", path="a.txt"),
        tool_use("toolu_4", "ghost"),
        tool_use("toolu_5", "nap", label="fast"),
    )
    handle = runtime.submit_message(message, mode="auto", workspace=workspace, rules=WRITES)
    reply = handle.reply(timeout=60)
    assert reply == handle.as_anthropic()
    assert same_after_validation(MessageParam, reply)
    blocks = reply["content"]
    assert [b["tool_use_id"] for b in blocks] == [f"toolu_{i}" for i in range(1, 6)]
    assert [b["is_error"] for b in blocks] == [False, False, False, True, False]
    assert "hello" in blocks[2]["content"]
    assert "unknown tool 'ghost'" in blocks[3]["content"]


def test_an_openai_turn_with_broken_arguments_fails_only_those_calls(runtime, workspace):
    (workspace / "a.txt").write_text("alpha")
    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in [
                    ("call_1", "read_file", '{"path": "a.txt"}'),
                    ("call_2", "read_file", '{"path": "a.txt"'),
                    ("call_3", "nap", '["label", "x"]'),
                    ("call_4", "nap", '{"label": "ok"}'),
                ]
            ],
        }
    )
    handle = runtime.submit_message(message, mode="auto", workspace=workspace)
    assert [r.status for r in handle.results(timeout=60)] == [
        Status.ok,
        Status.invalid_arguments,
        Status.invalid_arguments,
        Status.ok,
    ]
    reply = handle.as_openai()
    assert reply == handle.reply()
    for item in reply:
        assert same_after_validation(ChatCompletionToolMessageParam, item)
    assert [m["tool_call_id"] for m in reply] == ["call_1", "call_2", "call_3", "call_4"]
    assert "alpha" in reply[0]["content"]
    assert "must be a JSON object; got a string that is not JSON" in reply[1]["content"]
    assert "got a list" in reply[2]["content"]


def test_responses_function_calls_get_function_call_outputs(runtime, workspace):
    items = [
        ResponseFunctionToolCall(
            type="function_call", call_id=f"call_{i}", name="nap", arguments=json.dumps(args)
        )
        for i, args in enumerate([{"label": "a"}, {"label": 3}])
    ]
    handle = runtime.submit_message(items, mode="auto", workspace=workspace)
    reply = handle.reply(timeout=60)
    assert reply == handle.as_responses()
    for item in reply:
        assert same_after_validation(FunctionCallOutput, item)
    assert [(i["call_id"], i["type"]) for i in reply] == [
        ("call_0", "function_call_output"),
        ("call_1", "function_call_output"),
    ]
    assert "label: must be a string (got a number)" in reply[1]["output"]


def test_every_openai_chat_call_gets_a_reply_custom_and_empty_arguments_too(runtime, workspace):
    """A custom tool call is not run, but answered; `arguments: ""` is {}."""
    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "nap", "arguments": '{"label": "a"}'},
                },
                {"id": "call_2", "type": "custom", "custom": {"name": "grammar", "input": "x+1"}},
                {
                    "id": "call_3",
                    "type": "function",
                    "function": {"name": "list_dir", "arguments": ""},
                },
                {
                    "id": "call_4",
                    "type": "function",
                    "function": {"name": "nap", "arguments": '{"label": "b"}'},
                },
            ],
        }
    )
    handle = runtime.submit_message(message, mode="auto", workspace=workspace)
    reply = handle.reply(timeout=60)
    assert [m["tool_call_id"] for m in reply] == ["call_1", "call_2", "call_3", "call_4"]
    for item in reply:
        assert same_after_validation(ChatCompletionToolMessageParam, item)
    statuses = [r.status for r in handle.results()]
    assert statuses == [Status.ok, Status.unknown_tool, Status.ok, Status.ok]
    assert "'grammar' is a custom call, which toolrun does not run" in reply[1]["content"]


def test_every_responses_call_the_client_answers_gets_its_own_output_item(runtime, workspace):
    output = [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "list_dir",
            "arguments": "",
            "status": "completed",
        },
        {
            "type": "custom_tool_call",
            "id": "ct_1",
            "call_id": "call_2",
            "name": "grammar",
            "input": "x+1",
        },
        {
            "type": "local_shell_call",
            "id": "ls_1",
            "call_id": "call_3",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },
        {
            "type": "shell_call",
            "id": "sh_1",
            "call_id": "call_4",
            "status": "completed",
            "action": {"commands": ["ls"], "max_output_length": None, "timeout_ms": None},
        },
        {
            "type": "apply_patch_call",
            "id": "ap_1",
            "call_id": "call_5",
            "status": "completed",
            "operation": {"type": "delete_file", "path": "a.txt"},
        },
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "name": "fetch",
            "server_label": "web",
            "arguments": "{}",
        },
    ]
    items = [TypeAdapter(ResponseOutputItem).validate_python(item) for item in output]
    handle = runtime.submit_message(items, mode="auto", workspace=workspace)
    reply = handle.reply(timeout=60)
    assert len(reply) == len(output)
    for item in reply:
        assert same_after_validation(ResponseInputItemParam, item), item
    assert [item["type"] for item in reply] == [
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "mcp_approval_response",
    ]
    assert [r.status for r in handle.results()][0] is Status.ok  # "" ran with the defaults
    assert [r.status for r in handle.results()][1:] == [Status.unknown_tool] * 5
    assert reply[5] == {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr_1",
        "approve": False,
        "reason": reply[5]["reason"],
    }
    assert "which toolrun does not run" in reply[4]["output"]


def test_fifty_batches_stream_at_once_on_one_event_loop(runtime, workspace):
    before = threading.active_count()

    async def one(index: int) -> list[str]:
        message = anthropic_message(
            tool_use(f"a{index}", "nap", label=f"a{index}", seconds=0.2),
            tool_use(f"b{index}", "nap", label=f"b{index}"),
        )
        handle = await runtime.asubmit_message(message, mode="auto", workspace=workspace)
        seen = [result.call_id async for result in handle.astream(timeout=90)]
        assert (await handle.as_anthropic())["content"][0]["tool_use_id"] == f"a{index}"
        return seen

    async def heartbeat(stop: asyncio.Event, gaps: list[float], threads: list[int]) -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            threads.append(threading.active_count())
            last = now

    async def main():
        stop, gaps, threads = asyncio.Event(), [], []
        beat = asyncio.create_task(heartbeat(stop, gaps, threads))
        streamed = await asyncio.gather(*(one(i) for i in range(50)))
        stop.set()
        await beat
        return streamed, gaps, threads

    streamed, gaps, threads = asyncio.run(main())
    assert [sorted(seen) for seen in streamed] == [[f"a{i}", f"b{i}"] for i in range(50)]
    assert any(seen == [f"b{i}", f"a{i}"] for i, seen in enumerate(streamed)), "not as they finish"
    # Tests do not time things: that the loop kept turning while 50 batches
    # streamed is shown by the heartbeat's ticks, not by a bound on their gaps.
    assert len(gaps) >= 10, "the event loop did not run while the batches streamed"
    assert max(threads) - before <= 50 + 10, "more than one thread per batch"


@pytest.fixture
def env(stack, user_settings):
    return stack_env(stack, user_settings)


def test_toolrun_run_format_reads_a_provider_message_and_prints_the_reply(env, tmp_path, workspace):
    (workspace / "a.txt").write_text("from the file")
    message = anthropic_message(
        {"type": "text", "text": "Reading."},
        tool_use("toolu_1", "read_file", path="a.txt"),
        tool_use("toolu_2", "ghost"),
    )
    path = tmp_path / "message.json"
    path.write_text(message.model_dump_json())
    args = ("run", str(path), "--mode", "auto", "--workspace", str(workspace))
    done = toolrun(*args, "--format", "anthropic", env=env)
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert same_after_validation(MessageParam, reply)
    assert [(b["tool_use_id"], b["is_error"]) for b in reply["content"]] == [
        ("toolu_1", False),
        ("toolu_2", True),
    ]
    assert "from the file" in reply["content"][0]["content"]
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps([{"id": "c1", "name": "nap", "arguments": {"label": "x"}}]))
    done = toolrun("run", str(batch), "--workspace", str(workspace), "--format", "openai", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["tool_call_id"] == "c1"


def test_toolrun_run_format_refuses_what_it_cannot_read(env, tmp_path):
    path = tmp_path / "message.json"
    path.write_text(json.dumps({"role": "assistant", "content": "no tools today"}))
    assert_one_line_error(toolrun("run", str(path), "--format", "openai", env=env), "no tool calls")
    assert_one_line_error(toolrun("run", str(path), "--format", "xml", env=env), "unknown format")
    path.write_text(json.dumps({"hello": "world"}))
    assert_one_line_error(
        toolrun("run", str(path), "--format", "anthropic", env=env), "'content' list"
    )


@pytest.mark.parametrize(
    ("dialect", "schema", "name_of"),
    [
        ("anthropic", ToolParam, lambda d: d["name"]),
        ("openai", ChatCompletionFunctionToolParam, lambda d: d["function"]["name"]),
        ("responses", FunctionToolParam, lambda d: d["name"]),
        ("mcp", None, lambda d: d["name"]),
    ],
)
def test_toolrun_tools_format_prints_definitions_the_registry_accepts(
    tmp_path, dialect, schema, name_of
):
    env = toolrun_env(tmp_path, TOOLRUN_TOOL_MODULES=TEST_TOOLS)
    done = toolrun("tools", "--format", dialect, env=env)
    assert done.returncode == 0, done.stderr
    definitions = json.loads(done.stdout)
    names = [name_of(d) for d in definitions]
    assert {"read_file", "write_file", "nap", "bump"} <= set(names)
    for definition in definitions:
        if schema is None:
            import mcp.types

            mcp.types.Tool.model_validate(definition)
        else:
            assert same_after_validation(schema, definition)
