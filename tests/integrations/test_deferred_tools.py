"""Pydantic AI's deferred tools run by toolrun on the session's stack: a
scripted model (`FunctionModel`) calls a read and a write, the run ends with
`DeferredToolRequests`, toolrun runs them as one batch, and the run resumes
from its `DeferredToolResults`; a call the gate holds for a person is
answered with Pydantic AI's own approval values."""

from __future__ import annotations

import asyncio

from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from runtime.integrations.batches import Options
from runtime.integrations.deferred_tools import (
    aanswer,
    answer,
    arun_requests,
    run_requests,
    toolset,
)
from tests.support.tools import marks
from tests.support.twins import assert_same_as_direct

CALLS = [
    {"id": "read-1", "name": "echo", "arguments": {"text": "hello"}},
    {"id": "write-2", "name": "bump", "arguments": {"label": "agent"}},
]
POLICY = {"mode": "default", "rules": {"allow": ["bump"]}}


def scripted(messages, info):
    """Turn 1: a read and a write; turn 2: what the tools returned, as text."""
    returns = [
        part
        for message in messages
        for part in getattr(message, "parts", [])
        if isinstance(part, ToolReturnPart)
    ]
    if not returns:
        return ModelResponse(
            parts=[
                ToolCallPart("echo", {"text": "hello"}, tool_call_id="read-1"),
                ToolCallPart("bump", {"label": "agent"}, tool_call_id="write-2"),
            ]
        )
    return ModelResponse(parts=[TextPart(" | ".join(str(part.content) for part in returns))])


def agent(runtime) -> Agent:
    return Agent(
        FunctionModel(scripted),
        toolsets=[toolset(runtime, names=["echo", "bump"])],
        output_type=[str, DeferredToolRequests],
    )


def asked(runtime, workspace):
    """A run's first turn, its calls run by toolrun in default mode: the write waits."""
    bot = agent(runtime)
    first = bot.run_sync("go")
    batch = run_requests(runtime, first.output, Options(mode="default", workspace=workspace))
    return bot, first, batch


def resumed(bot, first, batch) -> str:
    return bot.run_sync(
        message_history=first.all_messages(), deferred_tool_results=batch.results
    ).output


def test_the_tools_are_the_registrys_with_their_schemas(runtime):
    [bump] = [d for d in toolset(runtime, names=["bump"]).tool_defs]
    assert bump.parameters_json_schema["properties"]["label"]["type"] == "string"


def test_a_turn_runs_as_one_batch_and_the_run_resumes_from_its_results(runtime, workspace):
    bot = agent(runtime)
    first = bot.run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)
    batch = run_requests(runtime, first.output, Options(**POLICY, workspace=workspace))
    assert batch.complete
    assert batch.results.calls == {"read-1": "hello", "write-2": "bumped"}
    # One batch, the model's order, run by the workers and in the ledger.
    results = runtime.attach(batch.batch_id).results(timeout=30)
    assert [r.call_id for r in results] == ["read-1", "write-2"]
    assert all(r.worker is not None for r in results)
    assert resumed(bot, first, batch) == "hello | bumped"
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["agent"]
    # The same results, ledger rows and transcript as the calls submitted directly.
    assert_same_as_direct(runtime, batch.batch_id, CALLS, **POLICY, workspace=workspace)


def test_a_call_the_gate_holds_is_a_pydantic_ai_approval_and_its_answer_runs_it(runtime, workspace):
    bot, first, batch = asked(runtime, workspace)
    assert not batch.complete
    assert [part.tool_call_id for part in batch.approvals.approvals] == ["write-2"]
    assert batch.results.calls == {"read-1": "hello"}
    assert marks(workspace, "effects") == []
    # The run can end here; a person answers later, in Pydantic AI's values.
    given = DeferredToolResults(approvals={"write-2": ToolApproved(override_args={"label": "ok"})})
    batch = answer(runtime, batch, given, by="person")
    assert batch.complete
    assert resumed(bot, first, batch) == "hello | bumped"
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["ok"]


def test_a_denial_reaches_the_model_and_runs_nothing(runtime, workspace):
    bot, first, batch = asked(runtime, workspace)
    given = DeferredToolResults(approvals={"write-2": ToolDenied("not on a Friday")})
    batch = answer(runtime, batch, given, by="person")
    assert batch.complete and "not on a Friday" in batch.results.calls["write-2"]
    assert "not on a Friday" in resumed(bot, first, batch)
    assert marks(workspace, "effects") == []


def test_on_the_event_loop_a_turn_is_one_batch_and_its_approval_is_answered(runtime, workspace):
    """`await agent.run(...)` with `arun_requests` and `aanswer`: no thread waits."""
    bot = agent(runtime)

    async def main():
        first = await bot.run("go")
        options = Options(mode="default", workspace=workspace)
        batch = await arun_requests(runtime, first.output, options)
        assert [part.tool_call_id for part in batch.approvals.approvals] == ["write-2"]
        given = DeferredToolResults(approvals={"write-2": True})
        batch = await aanswer(runtime, batch, given, by="person")
        assert batch.complete
        resumed = await bot.run(
            message_history=first.all_messages(), deferred_tool_results=batch.results
        )
        return resumed.output

    assert asyncio.run(main()) == "hello | bumped"
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["agent"]
