"""`ToolrunNode` in a small LangGraph graph on the session's stack: a fake chat
model calls a read and a write, the node runs them as one toolrun batch and
returns `ToolMessage`s in the model's order; a call the gate holds is an
`interrupt` that a `Command(resume=...)` approves, edits or rejects."""

from __future__ import annotations

import asyncio
from uuid import uuid4

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command

from runtime.integrations.batches import Options
from runtime.integrations.tool_node import ToolrunNode
from tests.support.tools import marks
from tests.support.twins import assert_same_as_direct

TURN = AIMessage(
    content="",
    tool_calls=[
        {"id": "read-1", "name": "echo", "args": {"text": "hello"}},
        {"id": "write-2", "name": "bump", "args": {"label": "graph"}},
        {"id": "bad-3", "name": "ecoh", "args": {}},
    ],
)


def graph(runtime, options: Options):
    model = GenericFakeChatModel(messages=iter([TURN, AIMessage(content="done")]))
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", ToolrunNode(runtime, options, by="reviewer"))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


def thread() -> dict:
    return {"configurable": {"thread_id": uuid4().hex}}


def tool_messages(state) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def test_a_turn_runs_as_one_batch_and_answers_in_the_models_order(runtime, workspace):
    options = Options(mode="default", workspace=workspace, rules={"allow": ["bump"]})
    state = graph(runtime, options).invoke({"messages": [("user", "go")]}, thread())
    replies = tool_messages(state)
    assert [m.tool_call_id for m in replies] == ["read-1", "write-2", "bad-3"]
    assert [m.status for m in replies] == ["success", "success", "error"]
    assert replies[0].content == "hello" and "echo" in replies[2].content
    assert state["messages"][-1].content == "done"
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["graph"]
    # The same results, ledger rows and transcript as the calls submitted directly.
    [batch_id] = {m.response_metadata["toolrun_batch_id"] for m in replies}
    calls = [{"id": c["id"], "name": c["name"], "arguments": c["args"]} for c in TURN.tool_calls]
    policy = {"mode": "default", "rules": {"allow": ["bump"]}}
    assert_same_as_direct(runtime, batch_id, calls, **policy, workspace=workspace)


def test_an_approval_is_an_interrupt_and_the_resume_edits_the_call(runtime, workspace):
    app, config = graph(runtime, Options(mode="default", workspace=workspace)), thread()
    state = app.invoke({"messages": [("user", "go")]}, config)
    [asked] = state["__interrupt__"]
    [waiting] = asked.value["waiting"]
    assert waiting["call_id"] == "write-2" and waiting["args"] == {"label": "graph"}
    assert marks(workspace, "effects") == []
    resume = {"write-2": {"type": "edit", "args": {"label": "edited"}}}
    state = app.invoke(Command(resume=resume), config)
    replies = tool_messages(state)
    assert [m.status for m in replies] == ["success", "success", "error"]
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["edited"]
    # One batch: the node's run again on resume attached to the one it started.
    results = runtime.attach(asked.value["batch_id"]).results(timeout=30)
    assert [r.model_message for r in results] == [m.content for m in replies]


def test_a_rejection_is_an_error_message_the_model_reads(runtime, workspace):
    app, config = graph(runtime, Options(mode="default", workspace=workspace)), thread()
    app.invoke({"messages": [("user", "go")]}, config)
    resume = {"write-2": {"type": "reject", "message": "not on a Friday"}}
    state = app.invoke(Command(resume=resume), config)
    write = tool_messages(state)[1]
    assert write.status == "error" and "not on a Friday" in write.content
    assert marks(workspace, "effects") == []


def test_on_the_event_loop_the_node_interrupts_and_resumes(runtime, workspace):
    """`ainvoke`: the node's async face, its wait on the event loop."""
    app, config = graph(runtime, Options(mode="default", workspace=workspace)), thread()

    async def main():
        state = await app.ainvoke({"messages": [("user", "go")]}, config)
        [asked] = state["__interrupt__"]
        assert [call["call_id"] for call in asked.value["waiting"]] == ["write-2"]
        return await app.ainvoke(Command(resume={"write-2": True}), config)

    state = asyncio.run(main())
    assert [m.status for m in tool_messages(state)] == ["success", "success", "error"]
    assert state["messages"][-1].content == "done"
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["graph"]
