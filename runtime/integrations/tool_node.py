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

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from runtime.client import Runtime
from runtime.integrations.batches import Options, Outcome, run, settle
from runtime.types import Status

REJECTED = "rejected by a person"


class ToolrunNode:
    """A graph node over `MessagesState`-shaped state (a `messages` list)."""

    def __init__(self, rt: Runtime, options: Options | None = None, *, by: str = "langgraph"):
        """`by`: who the ledger says answered an approval given on resume."""
        self.rt = rt
        self.options = options or Options()
        self.by = by

    def __call__(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        messages = state["messages"]
        position, message = _last_ai(messages)
        calls = [
            {"id": call["id"], "name": call["name"], "arguments": call["args"]}
            for call in message.tool_calls
        ]
        # LangGraph runs the node again from its start on resume: the key makes
        # that submit attach to the batch the first run started.
        key = _key(config, position, calls)
        outcome = run(self.rt, calls, self.options, key)
        while outcome.waiting:
            answers = interrupt(
                {
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
            )
            outcome = self._answer(outcome, answers or {})
        return {"messages": [_message(outcome, call) for call in calls]}

    def _answer(self, outcome: Outcome, answers: dict[str, Any]) -> Outcome:
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
        return settle(self.rt.attach(batch), answered=set(answers) & set(outcome.waiting))


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
