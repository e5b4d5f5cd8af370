"""The OpenAI Agents SDK with toolrun's tools on the session's stack: a model
of our own (the SDK's `Model` interface, scripted) calls a read and a write,
each runs on toolrun's workers, and a call the gate holds is one of the SDK's
tool approvals, approved or rejected through the run's state."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest
from agents import Agent, ModelResponse, Runner, Usage, set_tracing_disabled
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from runtime.integrations.batches import Options
from runtime.integrations.function_tools import areject, function_tools, key_of
from tests.support.tools import marks
from tests.support.twins import assert_same_as_direct


@pytest.fixture(autouse=True, scope="module")
def _no_tracing():
    set_tracing_disabled(True)  # the SDK's exporter would need an OpenAI key


class Scripted(Model):
    """Turn 1: a read and a write; turn 2: the tools' outputs, as the answer."""

    def __init__(self) -> None:
        self.ids = [f"read-{uuid4().hex[:8]}", f"write-{uuid4().hex[:8]}"]

    async def get_response(self, system_instructions, input, *args, **kwargs):
        outputs = [
            item["output"]
            for item in (input if isinstance(input, list) else [])
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if not outputs:
            calls = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=self.ids[0],
                    name="echo",
                    arguments='{"text": "hello"}',
                ),
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=self.ids[1],
                    name="bump",
                    arguments='{"label": "agents"}',
                ),
            ]
            return ModelResponse(output=calls, usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=" | ".join(outputs), annotations=[])
        message = ResponseOutputMessage(
            id="answer", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests do not stream")


def agent(runtime, options: Options) -> Agent:
    tools = function_tools(runtime, options, names=["echo", "bump"], by="reviewer")
    return Agent(name="toolrun", model=Scripted(), tools=tools)


def test_the_calls_run_on_toolruns_workers(runtime, workspace):
    options = Options(mode="default", workspace=workspace, rules={"allow": ["bump"]})
    bot = agent(runtime, options)
    result = asyncio.run(Runner.run(bot, "go"))
    assert result.interruptions == []
    assert result.final_output == "hello | bumped"
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["agents"]
    # Each call is a batch of its own (the SDK runs each through its own
    # on_invoke_tool): the same results, ledger rows and transcript as that
    # call submitted directly.
    said = [("echo", {"text": "hello"}), ("bump", {"label": "agents"})]
    for call_id, (name, arguments) in zip(bot.model.ids, said, strict=True):
        call = {"id": call_id, "name": name, "arguments": arguments}
        batch_id = options.submit(runtime, [call], key_of(name, arguments, call_id)).batch_id
        policy = {"mode": "default", "rules": {"allow": ["bump"]}, "workspace": workspace}
        assert_same_as_direct(runtime, batch_id, [call], **policy)


def test_a_call_the_gate_holds_is_an_sdk_approval(runtime, workspace):
    bot = agent(runtime, Options(mode="default", workspace=workspace))

    async def main():
        first = await Runner.run(bot, "go")
        [item] = first.interruptions
        assert item.raw_item.name == "bump"
        assert marks(workspace, "effects") == []
        state = first.to_state()
        state.approve(item)
        return item, await Runner.run(bot, state)

    item, result = asyncio.run(main())
    assert result.final_output == "hello | bumped"
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["agents"]
    # The SDK's approval is toolrun's, in the ledger with who gave it.
    [row] = runtime.deployment.approvals.find(item.raw_item.call_id)
    assert (row.status, row.answered_by) == ("approved", "reviewer")


def test_a_rejection_denies_the_toolrun_call(runtime, workspace):
    options = Options(mode="default", workspace=workspace)
    bot = agent(runtime, options)

    async def main():
        first = await Runner.run(bot, "go")
        [item] = first.interruptions
        state = first.to_state()
        await areject(runtime, state, item, "not today", options=options)
        return item, await Runner.run(bot, state)

    item, result = asyncio.run(main())
    assert "hello" in result.final_output
    assert marks(workspace, "effects") == []
    [row] = runtime.deployment.approvals.find(item.raw_item.call_id)
    assert (row.status, row.answered_by) == ("denied", "openai-agents")
