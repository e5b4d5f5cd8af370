"""The OpenAI Agents SDK's function tools run by toolrun (docs/architecture.md,
"Integrations"): `function_tools(rt, options)` is the registry's tools as
`FunctionTool`s whose `needs_approval` asks toolrun's gate and whose
`on_invoke_tool` runs the call on toolrun's workers, on the event loop (no
thread waits for a batch). The SDK asks `needs_approval` of each of a turn's
calls and runs each through its own `on_invoke_tool`, as tasks of their own,
so each call is a one-call batch: the SDK, not toolrun, orders a turn's calls
(docs/architecture.md, "Integrations", says why a turn cannot be one batch).
Needs the `openai-agents` extra."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from typing import Any

from agents import FunctionTool, RunContextWrapper, RunState, ToolApprovalItem
from agents.tool_context import ToolContext

from runtime.client import Runtime
from runtime.client.handle import AsyncBatchHandle, BatchHandle
from runtime.integrations.batches import Options, Outcome, aattach, asettle
from runtime.registry.capabilities import CapabilitySpec


class Calls:
    """Each SDK call as a one-call toolrun batch, keyed by the provider's call
    id and arguments: `needs_approval` submits it, and `on_invoke_tool` (and a
    rejection) find the same batch again, from any process."""

    def __init__(self, rt: Runtime, options: Options, by: str) -> None:
        self.rt, self.options, self.by = rt, options, by

    def submit(self, name: str, arguments: Any, call_id: str) -> BatchHandle:
        call = {"id": call_id, "name": name, "arguments": arguments}
        return self.options.submit(self.rt, [call], key_of(name, arguments, call_id))

    async def asubmit(self, name: str, arguments: Any, call_id: str) -> AsyncBatchHandle:
        call = {"id": call_id, "name": name, "arguments": arguments}
        return await self.options.asubmit(self.rt, [call], key_of(name, arguments, call_id))

    async def asks(self, name: str, arguments: Any, call_id: str) -> bool:
        """Whether the gate holds the call for a person (the SDK then interrupts)."""
        return call_id in (await asettle(await self.asubmit(name, arguments, call_id))).waiting

    async def result(self, name: str, arguments: Any, call_id: str) -> str:
        """The call's result as the model reads it; a call still waiting here was
        approved through the SDK, so toolrun is told so first."""
        handle = await self.asubmit(name, arguments, call_id)
        outcome: Outcome = await asettle(handle)
        if call_id in outcome.waiting:
            approve = functools.partial(self.rt.approve, handle.batch_id, call_id, by=self.by)
            await asyncio.to_thread(approve)
            handle = await aattach(self.rt, handle.batch_id)
            outcome = await asettle(handle, answered={call_id})
        return outcome.results[call_id].model_message


def key_of(name: str, arguments: Any, call_id: str) -> str:
    """The key of a call's one-call batch: submitting the call again with it
    (from any process) attaches to that batch."""
    said = json.dumps([name, arguments, call_id], sort_keys=True, default=str)
    return "agents-" + hashlib.sha256(said.encode()).hexdigest()[:32]


def function_tools(
    rt: Runtime, options: Options | None = None, *, names: list[str] | None = None, by: str = ""
) -> list[FunctionTool]:
    """The registry's tools (or those `names`) for an `Agent(tools=...)`.
    `by`: who the ledger says approved a call the SDK's run approved."""
    calls = Calls(rt, options or Options(), by or "openai-agents")
    return [_tool(spec, calls) for spec in rt.registry if names is None or spec.name in names]


def reject(
    rt: Runtime,
    state: RunState,
    item: ToolApprovalItem,
    reason: str,
    *,
    options: Options | None = None,
    by: str = "openai-agents",
) -> None:
    """`state.reject(item)`, and the waiting toolrun call denied with `reason`
    (else it would wait until its approval expired)."""
    state.reject(item, rejection_message=reason)
    raw = item.raw_item
    arguments = _parsed(raw.arguments)
    handle = Calls(rt, options or Options(), by).submit(raw.name, arguments, raw.call_id)
    handle.deny(raw.call_id, reason, by=by)


async def areject(
    rt: Runtime,
    state: RunState,
    item: ToolApprovalItem,
    reason: str,
    *,
    options: Options | None = None,
    by: str = "openai-agents",
) -> None:
    """`reject` from the event loop: its ledger work runs on a thread."""
    deny = functools.partial(reject, rt, state, item, reason, options=options, by=by)
    await asyncio.to_thread(deny)


def _tool(spec: CapabilitySpec, calls: Calls) -> FunctionTool:
    async def needs_approval(_ctx: RunContextWrapper, arguments: dict, call_id: str) -> bool:
        return await calls.asks(spec.name, arguments, call_id)

    async def invoke(ctx: ToolContext, input_json: str) -> str:
        return await calls.result(spec.name, _parsed(input_json), ctx.tool_call_id)

    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=spec.input_model.model_json_schema(),
        on_invoke_tool=invoke,
        strict_json_schema=False,
        needs_approval=needs_approval,
    )


def _parsed(text: str | None) -> Any:
    """The model's arguments; text that is not JSON goes to toolrun as it is,
    whose validation tells the model what is wrong with it."""
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text
