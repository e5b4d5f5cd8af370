"""`toolrun mcp serve` driven by the official MCP Python client, as a separate
process against the session's stack: its tools are the registry's under the
server's policy, and each call is a toolrun batch on the real workers."""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.cli import REPO, SCRIPT, stack_env
from tests.support.tools import marks
from tests.support.twins import assert_same_as_direct


@asynccontextmanager
async def served(stack, user_settings, workspace: Path, *flags: str, **client: Any):
    """`client`: the MCP client's own options (an elicitation callback)."""
    argv = [SCRIPT] if SCRIPT else [sys.executable, "-m", "runtime.cli"]
    parameters = StdioServerParameters(
        command=argv[0],
        args=[*argv[1:], "mcp", "serve", "--workspace", str(workspace), *flags],
        env=stack_env(stack, user_settings),
        cwd=str(REPO),  # where the test tools import from, as the workers do
    )
    with (workspace.parent / "server.log").open("w+") as errlog:
        async with Client(stdio_client(parameters, errlog=errlog), **client) as session:
            yield session


def call_once(stack, user_settings, workspace: Path, name: str, arguments: dict, *flags: str):
    """One `tools/call` on a server of its own."""

    async def main():
        async with served(stack, user_settings, workspace, *flags) as client:
            return await client.call_tool(name, arguments)

    return anyio.run(main)


def text(result) -> str:
    return " ".join(part.text for part in result.content)


def test_tools_are_the_registrys_with_hints_from_their_risk(stack, user_settings, workspace):
    async def main():
        async with served(stack, user_settings, workspace) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = anyio.run(main)
    assert tools["echo"].annotations.read_only_hint is True
    assert tools["bump"].annotations.read_only_hint is False
    assert tools["obliterate"].annotations.destructive_hint is True
    assert tools["bump"].input_schema["properties"]["label"]["type"] == "string"
    assert tools["echo"].description


def test_plan_mode_lists_only_what_it_can_run(stack, user_settings, workspace):
    async def main():
        async with served(stack, user_settings, workspace, "--mode", "plan") as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    names = anyio.run(main)
    assert "echo" in names and "bump" not in names


def test_a_read_runs_on_the_workers_and_lands_in_the_ledger(
    stack, user_settings, workspace, runtime
):
    result = call_once(stack, user_settings, workspace, "echo", {"text": "over mcp"})
    assert result.is_error is False
    assert text(result) == "over mcp"
    assert result.structured_content == {"text": "over mcp"}
    batch_id = result.meta["toolrun/batch_id"]
    [ended] = runtime.attach(batch_id).results(timeout=30)
    assert ended.worker is not None and ended.status == "ok"
    kinds = [row.kind for row in runtime.ledger.events(batch_id)]
    assert "decision" in kinds and "finished" in kinds
    call = {"id": result.meta["toolrun/call_id"], "name": "echo", "arguments": {"text": "over mcp"}}
    assert_same_as_direct(runtime, batch_id, [call], mode="default", workspace=workspace)


def test_bad_input_is_an_error_result_the_model_reads(stack, user_settings, workspace):
    async def main():
        async with served(stack, user_settings, workspace) as client:
            unknown = await client.call_tool("ecoh", {"text": "x"})
            invalid = await client.call_tool("echo", {"txt": "x"})
            return unknown, invalid

    unknown, invalid = anyio.run(main)
    assert unknown.is_error and "echo" in text(unknown)
    assert invalid.is_error and "text" in text(invalid)


def test_a_denied_call_is_an_error_result_and_runs_nothing(stack, user_settings, workspace):
    async def main():
        async with served(stack, user_settings, workspace, "--deny", "bump") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            return names, await client.call_tool("bump", {"label": "no"})

    names, result = anyio.run(main)
    assert "bump" not in names
    assert result.is_error and result.meta["toolrun/status"] == "denied"
    assert "deny" in text(result).lower()
    assert marks(workspace, "effects") == []


def test_a_call_that_needs_approval_says_how_and_runs_once_approved(
    stack, user_settings, workspace, runtime
):
    result = call_once(stack, user_settings, workspace, "bump", {"label": "asked"})
    assert result.is_error and result.meta["toolrun/status"] == "awaiting_approval"
    batch_id, call_id = result.meta["toolrun/batch_id"], result.meta["toolrun/call_id"]
    assert f"toolrun approve {call_id} --batch {batch_id}" in text(result)
    assert marks(workspace, "effects") == []
    # The server is gone; the batch is the cluster's, and a person's answer runs it.
    assert runtime.approve(batch_id, call_id, by="test")
    [ended] = runtime.attach(batch_id).results(timeout=30)
    assert ended.status == "ok"
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["asked"]


def test_with_an_approval_wait_the_answer_comes_back_in_the_call(
    stack, user_settings, workspace, runtime
):
    label = {"label": f"waited-{workspace.name}-{id(workspace)}"}

    async def approve_when_asked():
        mine = []
        while not mine:
            await anyio.sleep(0.05)
            mine = [row for row in runtime.pending_approvals() if row.arguments == label]
        runtime.approve(mine[0].batch_id, mine[0].call_id, by="test")

    async def main():
        async with served(stack, user_settings, workspace, "--approval-wait", "60") as client:
            async with anyio.create_task_group() as group:
                group.start_soon(approve_when_asked)
                return await client.call_tool("bump", label)

    result = anyio.run(main)
    assert result.is_error is False and text(result) == "bumped"
    assert [mark["label"] for mark in marks(workspace, "effects")] == [label["label"]]


pytestmark = pytest.mark.timeout(120)


def test_a_call_the_client_cancels_is_cancelled_in_toolrun(
    stack, user_settings, workspace, runtime
):
    label = {"label": f"cancelled-{workspace.parent.name}"}
    waiting = []

    async def cancel_when_waiting(scope):
        while not waiting:
            await anyio.sleep(0.05)
            waiting[:] = [row for row in runtime.pending_approvals() if row.arguments == label]
        scope.cancel()  # the client abandons the request: notifications/cancelled

    async def main():
        async with served(stack, user_settings, workspace, "--approval-wait", "60") as client:
            async with anyio.create_task_group() as group:
                group.start_soon(cancel_when_waiting, group.cancel_scope)
                await client.call_tool("bump", label)
            return await client.call_tool("echo", {"text": "still serving"})

    after = anyio.run(main)
    assert text(after) == "still serving"
    [row] = waiting
    [ended] = runtime.attach(row.batch_id).results(timeout=30)
    assert ended.status == "cancelled", ended.model_message
    assert marks(workspace, "effects") == []
