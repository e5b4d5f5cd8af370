"""A LangGraph tool node run by toolrun (docs/architecture.md, "Integrations"):
where a graph had `ToolNode(tools)`, `ToolrunNode(rt, options)` runs the last
`AIMessage`'s tool calls as one toolrun batch and returns a `ToolMessage` per
call in the model's order, failures and refusals with `status="error"`. A call
the gate holds for a person becomes a LangGraph `interrupt`; the graph resumed
with `Command(resume={call_id: answer})` approves, edits or rejects it. Needs
the `langgraph` extra."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anyio
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.types import interrupt

from runtime.client import Runtime
from runtime.integrations.batches import Options, Outcome, aattach, arun, asettle, run, settle
from runtime.types import Status

REJECTED = "rejected by a person"


class ToolrunNode(RunnableLambda):
    """A graph node over `MessagesState`-shaped state (a `messages` list), for
    `graph.invoke` and, on the event loop with no thread waiting, `ainvoke`."""

    def __init__(self, rt: Runtime, options: Options | None = None, *, by: str = "langgraph"):
        """`by`: who the ledger says answered an approval given on resume."""
        super().__init__(self._run, afunc=self._arun, name="tools")
        self.rt = rt
        self.options = options or Options()
        self.by = by

    def _run(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        calls, key = _turn(state, config)
        outcome = run(self.rt, calls, self.options, key)
        while outcome.waiting:
            answers = interrupt(_asked(outcome, calls)) or {}
            self._answer(outcome, answers)
            handle = self.rt.attach(outcome.batch_id)
            outcome = settle(handle, answered=set(answers) & set(outcome.waiting))
        return {"messages": [_message(outcome, call) for call in calls]}

    async def _arun(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        calls, key = _turn(state, config)
        outcome = await arun(self.rt, calls, self.options, key)
        while outcome.waiting:
            answers = interrupt(_asked(outcome, calls)) or {}
            await anyio.to_thread.run_sync(self._answer, outcome, answers)
            handle = await aattach(self.rt, outcome.batch_id)
            outcome = await asettle(handle, answered=set(answers) & set(outcome.waiting))
        return {"messages": [_message(outcome, call) for call in calls]}

    def _answer(self, outcome: Outcome, answers: dict[str, Any]) -> None:
        """Each resume answer, given to toolrun: `True` or `{"type": "approve"}`,
        `{"type": "edit", "args": {...}}`, `False` or `{"type": "reject",
        "message": "why"}`. A waiting call with no answer stays waiting."""
        batch = outcome.batch_id
        for call_id, given in answers.items():
            if call_id not in outcome.waiting:
                continue
            kind = given.get("type") if isinstance(given, dict) else given
            if kind in (True, "approve"):
                self.rt.approve(batch, call_id, by=self.by)
            elif kind == "edit":
                self.rt.approve(batch, call_id, by=self.by, updated_arguments=given.get("args"))
            else:
                reason = given.get("message") if isinstance(given, dict) else None
                self.rt.deny(batch, call_id, reason or REJECTED, by=self.by)


def _turn(state: dict[str, Any], config: RunnableConfig) -> tuple[list[dict[str, Any]], str]:
    """The last AI message's calls, and the key of their batch: LangGraph runs
    the node again from its start on resume, and the key makes that submit
    attach to the batch the first run started."""
    position, message = _last_ai(state["messages"])
    calls = [
        {"id": call["id"], "name": call["name"], "arguments": call["args"]}
        for call in message.tool_calls
    ]
    return calls, _key(config, position, calls)


def _asked(outcome: Outcome, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The interrupt's value: the batch and each call that waits."""
    return {
        "batch_id": outcome.batch_id,
        "waiting": [
            {
                "call_id": notice.call_id,
                "tool": notice.tool,
                "reason": notice.reason,
                "args": _arguments(calls, notice.call_id),
            }
            for notice in outcome.waiting.values()
        ],
    }


def _last_ai(messages: list[Any]) -> tuple[int, AIMessage]:
    for position in range(len(messages) - 1, -1, -1):
        if isinstance(messages[position], AIMessage):
            return position, messages[position]
    raise ValueError("ToolrunNode needs an AIMessage with tool calls in the state's messages")


def _key(config: RunnableConfig, position: int, calls: list[dict[str, Any]]) -> str:
    """The turn's key: its thread, its place in the thread and its calls."""
    thread = (config.get("configurable") or {}).get("thread_id", "")
    said = json.dumps([thread, position, calls], sort_keys=True, default=str)
    return "langgraph-" + hashlib.sha256(said.encode()).hexdigest()[:32]


def _arguments(calls: list[dict[str, Any]], call_id: str) -> Any:
    return next(call["arguments"] for call in calls if call["id"] == call_id)


def _message(outcome: Outcome, call: dict[str, Any]) -> ToolMessage:
    result = outcome.results[call["id"]]
    return ToolMessage(
        content=result.model_message,
        tool_call_id=call["id"],
        name=call["name"],
        status="success" if result.status is Status.ok else "error",
        response_metadata={"toolrun_batch_id": outcome.batch_id},
    )
