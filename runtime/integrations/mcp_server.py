"""toolrun as an MCP server (`toolrun mcp serve`): the registry's tools, as the
policy lets this server's batches run them, for any MCP client; each
`tools/call` is a one-call toolrun batch through the gate, the ledger and the
cluster (docs/architecture.md, "Integrations"). Needs the `mcp` extra."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from uuid import uuid4

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from runtime import adapters
from runtime.client import Runtime
from runtime.integrations import elicitation
from runtime.integrations.batches import Options, Outcome, aattach, asettle
from runtime.types import Mode, Status, ToolResult

T = TypeVar("T")
# What a request's caller may use of the server's options (`mcp_http.bound`).
Binding = Callable[[Any, Options], Options]


class Refused(Exception):
    """The caller may not use the server's options; the message says why."""


def tools(rt: Runtime, options: Options) -> list[types.Tool]:
    """The tools this server's batches may run: what the gate would refuse
    whatever the arguments is left out (`adapters.definitions`)."""
    workspace = Path(options.workspace or ".")
    policy = rt.policies.policy_for(workspace, options.rules)
    mode = Mode(options.mode or Mode.default)
    listed = adapters.definitions(rt.registry, "mcp", mode=mode, policy=policy)
    return [types.Tool.model_validate(definition) for definition in listed]


async def call(
    rt: Runtime, options: Options, ctx: Any, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    """One `tools/call` as a one-call batch: its result; or, for a call that
    waits for a person, the person at the client asked (`elicitation`) or the
    result saying what waits and how to answer it. Progress notifications
    follow the call; a client that cancels the request cancels the batch."""
    progress = elicitation.Progress(ctx.session)
    again = elicitation.retried(params)
    if again is not None:  # the client's retry with the person's answer (2026-07-28)
        batch_id, call_id, given = again
        return await _answered(rt, options, progress, batch_id, call_id, given)
    call_id = f"mcp-{uuid4().hex[:12]}"
    arguments = {} if params.arguments is None else params.arguments
    entry = {"id": call_id, "name": params.name, "arguments": arguments}
    with anyio.CancelScope(shield=True):  # a cancel meanwhile reaches `_cancelling`
        handle = await options.asubmit(rt, [entry])
    await progress.step(0.0, f"submitted as toolrun batch {handle.batch_id}")
    asks = options.client_answers and elicitation.supported(ctx)
    wait = 0.0 if asks else options.approval_wait
    outcome = await _cancelling(rt, handle.batch_id, asettle(handle, wait, (), progress.seen))
    if not (asks and call_id in outcome.waiting):
        return answer(outcome, call_id)
    asked = elicitation.question(outcome, call_id, arguments)
    if not ctx.session.can_send_request:
        return elicitation.input_required(asked, outcome.batch_id, call_id)
    given = await _cancelling(
        rt,
        outcome.batch_id,
        ctx.session.elicit_form(asked.message, asked.requested_schema, ctx.request_id),
    )
    return await _answered(rt, options, progress, outcome.batch_id, call_id, given)


async def _answered(
    rt: Runtime,
    options: Options,
    progress: elicitation.Progress,
    batch_id: str,
    call_id: str,
    given: Any,
) -> types.CallToolResult:
    """The person's answer given to toolrun, then the call settled again: its
    result, or (a `cancel`, or no answer) what waits and how to answer it."""
    by = options.submitter or "mcp client"
    action = getattr(given, "action", None) if options.client_answers else None
    if action == "accept":
        await anyio.to_thread.run_sync(lambda: rt.approve(batch_id, call_id, by=by))
        await progress.step(0.5, f"approved by {by}")
    elif action == "decline":
        await anyio.to_thread.run_sync(
            lambda: rt.deny(batch_id, call_id, elicitation.DECLINED, by=by)
        )
        await progress.step(0.5, f"denied by {by}")
    handle = await aattach(rt, batch_id)
    answered = {call_id} if action in ("accept", "decline") else set()
    outcome = await _cancelling(rt, batch_id, asettle(handle, 0.0, answered, progress.seen))
    return answer(outcome, call_id)


async def _cancelling(rt: Runtime, batch_id: str, waiting: Awaitable[T]) -> T:
    """Await `waiting`; a client that cancels the request meanwhile
    (`notifications/cancelled`) cancels the batch."""
    try:
        return await waiting
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: rt.cancel(batch_id, by="mcp client"))
        raise


def answer(outcome: Outcome, call_id: str) -> types.CallToolResult:
    """The call's result as MCP's: the model message as text, images as MCP
    images, a structured result (a JSON object) as structured content."""
    meta = {"toolrun/batch_id": outcome.batch_id, "toolrun/call_id": call_id}
    if call_id in outcome.waiting:
        text = outcome.how_to_answer(call_id)
        meta["toolrun/status"] = "awaiting_approval"
        waits = [types.TextContent(text=text)]
        return types.CallToolResult(content=waits, is_error=True, meta=meta)
    result = outcome.results[call_id]
    meta["toolrun/status"] = result.status.value
    structured = result.content if isinstance(result.content, dict) else None
    return types.CallToolResult(
        content=content(result),
        structured_content=structured,
        is_error=result.status is not Status.ok,
        meta=meta,
    )


def content(result: ToolResult) -> list[types.TextContent | types.ImageContent]:
    """The model-readable message, then the result's images as MCP images."""
    found: list[types.TextContent | types.ImageContent] = [
        types.TextContent(text=result.model_message)
    ]
    for media in result.media:
        if media.kind == "image":
            found.append(types.ImageContent(data=media.data, mime_type=media.mime_type))
    return found


def server(
    rt: Runtime,
    options: Options,
    bind: Binding | None = None,
    principal: Callable[[Any], str | None] | None = None,
) -> Server:
    """An MCP server whose tools are `rt`'s registry under `options`, or under
    what `bind` makes of them for each request (the HTTP face's caller's key);
    `principal`: who a request is (its key), bound into its request state."""

    def bound(ctx: Any) -> Options:
        return options if bind is None else bind(ctx, options)

    async def list_tools(ctx: Any, _params: Any) -> types.ListToolsResult:
        try:
            chosen = bound(ctx)
        except Refused:  # nothing this caller may run
            return types.ListToolsResult(tools=[])
        return types.ListToolsResult(tools=await anyio.to_thread.run_sync(tools, rt, chosen))

    async def call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            chosen = bound(ctx)
        except Refused as refused:
            said = [types.TextContent(text=str(refused))]
            return types.CallToolResult(content=said, is_error=True)
        return await call(rt, chosen, ctx, params)

    mcp = Server(
        "toolrun",
        instructions="Tools run by toolrun: gated, audited and run on its workers.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    mcp.middleware.append(elicitation.boundary(principal))
    return mcp


@asynccontextmanager
async def _serving(rt: Runtime) -> AsyncIterator[None]:
    try:
        yield
    finally:
        # The batches belong to the cluster: a call waiting for a person still runs
        # once approved after this server is gone.
        rt.close(cancel=False)


def serve_stdio(rt: Runtime, options: Options) -> None:
    """Serve over stdin and stdout until the client closes them."""

    async def main() -> None:
        async with _serving(rt), stdio_server() as (read_stream, write_stream):
            mcp = server(rt, options)
            await mcp.run(read_stream, write_stream, mcp.create_initialization_options())

    anyio.run(main)
