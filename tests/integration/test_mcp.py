"""MCP servers' tools through real workers: a stack of its own (module scope),
whose clients and workers all register the servers of one servers file, so the
session's shared stack stays as it is."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from anthropic.types import MessageParam

from runtime.sandbox.programs import needed
from runtime.settings import Settings
from runtime.types import Risk, Status
from tests.adapters.test_anthropic import same_after_validation
from tests.conftest import TEST_TOOLS
from tests.support.anthropic_messages import anthropic_message
from tests.support.tools import marks

pytestmark = pytest.mark.timeout(120)
SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_server.py"
COMMAND = [sys.executable, str(SERVER)]
# Auto mode runs side effects only where a rule allows them.
WRITES = {"allow": ["notes__append_note", "write_file"]}


@pytest.fixture(scope="module")
def mcp_stack(tmp_path_factory, user_settings):
    from runtime.client import Runtime
    from runtime.stack.embedded import start_stack, stop_stack

    home = tmp_path_factory.mktemp("toolrun-mcp-home")
    folder = tmp_path_factory.mktemp("mcp-servers")
    flag = folder / "refuse"
    servers = folder / "servers.json"
    servers.write_text(
        json.dumps(
            {
                "servers": {
                    "notes": {"command": COMMAND, "trusted": True, "timeout": 3},
                    "stranger": {"command": COMMAND},
                    "flaky": {
                        "command": COMMAND,
                        "trusted": True,
                        "env": {"NOTES_REFUSE_IF": str(flag)},
                        # the sandbox shows the server the flag's folder
                        "read_only": [str(flag.parent)],
                    },
                }
            }
        )
    )
    settings = Settings(
        home=home,
        tool_modules=TEST_TOOLS,
        mcp_servers_file=servers,
        user_settings_file=user_settings,
    )
    record = start_stack(settings, flower=False, extra_env={"TOOLRUN_TOOL_MODULES": TEST_TOOLS})
    try:
        update = {"redis_url": record.redis_url, "database_url": record.database_url}
        runtime = Runtime(settings.model_copy(update=update))
        flag.touch()  # from now on the `flaky` server refuses to start
        yield runtime
        runtime.close()
    finally:
        stop_stack(home)


def call(call_id, tool, /, **arguments):
    return {"id": call_id, "name": tool, "arguments": arguments}


def test_a_batch_mixing_mcp_tools_and_builtins_keeps_the_models_order(mcp_stack, workspace):
    batch = [
        call("r1", "notes__read_note", name="todo"),
        call("r2", "nap", label="beside", seconds=0.5),
        call("w1", "notes__append_note", name="todo", text="milk"),
        call("r3", "notes__read_note", name="todo"),
        call("w2", "write_file", path="notes/todo.txt", content="eggs\n"),
        call("r4", "read_file", path="notes/todo.txt"),
    ]
    handle = mcp_stack.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    results = handle.results(timeout=60)
    assert [r.call_id for r in results] == ["r1", "r2", "w1", "r3", "w2", "r4"]
    assert [r.status for r in results] == [Status.ok] * 6, [r.model_message for r in results]
    assert results[0].content == {"name": "todo", "text": "", "lines": 0}
    assert results[2].content["text"] == "milk\n" and results[3].content["text"] == "milk\n"
    assert "eggs" in results[5].content["text"]
    [nap] = marks(workspace, "intervals")
    [append] = [m for m in marks(workspace, "effects") if m["label"] == "append_note:todo"]
    assert nap["end"] <= append["at"]
    assert "reads" in results[0].worker and "effects" in results[2].worker

    registry = mcp_stack.registry
    assert registry.get("notes__read_note").risk is Risk.read
    assert registry.get("notes__append_note").risk is Risk.write
    rows = mcp_stack.ledger.events(handle.batch_id)
    decided = {e.call_id: e.effect for e in rows if e.kind == "decision"}
    assert decided == dict.fromkeys(["r1", "r2", "w1", "r3", "w2", "r4"], "allow")
    finished = {(e.call_id, e.kind) for e in rows}
    assert {("w1", "started"), ("w1", "finished"), ("r1", "finished")} <= finished
    assert [c.status for c in mcp_stack.ledger.calls(handle.batch_id)] == ["ok"] * 6


def test_an_untrusted_servers_hints_grant_nothing(mcp_stack, workspace):
    assert mcp_stack.registry.get("stranger__read_note").risk is Risk.unknown
    batch = [call("s", "stranger__append_note", name="x", text="y"), call("n", "nap", label="n")]
    handle = mcp_stack.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    results = handle.results(timeout=60)
    assert [r.status for r in results] == [Status.denied, Status.ok]
    assert not (workspace / "notes").exists()
    decision = next(
        e
        for e in mcp_stack.ledger.events(handle.batch_id)
        if e.call_id == "s" and e.kind == "decision"
    )
    assert decision.effect == "deny"


def test_a_stdio_server_runs_in_the_sandbox(mcp_stack, workspace, tmp_path):
    """It sees its own processes in /proc, not the worker's nor this test's; not
    another workspace; and writes what it writes in its call's workspace only."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "secret.txt").write_text("another batch's secret")
    batch = [
        call("p", "notes__peek", place="/proc"),
        call("o", "notes__peek", place=str(other / "secret.txt")),
        call("h", "notes__peek", place=str(Path.home())),
        call("w", "notes__append_note", name="kept", text="inside"),
    ]
    handle = mcp_stack.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    procs, secret, home, wrote = handle.results(timeout=60)
    assert procs.ok and secret.ok and home.ok and wrote.ok, [procs, secret, home, wrote]
    pids = {name for name in procs.model_message.split() if name.isdigit()}
    assert pids and str(os.getpid()) not in pids, pids
    assert pids <= {str(pid) for pid in range(1, 20)}, pids  # its own pid namespace
    assert "another batch's secret" not in secret.model_message
    assert "unreadable" in secret.model_message
    # Of the home, only the way to the server's own interpreter, read-only.
    own = {
        p.relative_to(Path.home()).parts[0]
        for p in needed(COMMAND)
        if p.is_relative_to(Path.home())
    }
    seen = home.model_message
    assert seen.startswith("unreadable") or set(seen.split()) <= own, seen
    assert (workspace / "notes" / "kept.txt").read_text() == "inside\n"


def test_a_server_that_dies_fails_to_start_or_times_out_ends_only_that_call(mcp_stack, workspace):
    batch = [
        call("died", "notes__crash"),
        call("refused", "flaky__read_note", name="x"),
        call("slow", "notes__slow", seconds=30),
        call("fine", "nap", label="fine"),
        call("after", "notes__append_note", name="log", text="still here"),
    ]
    results = mcp_stack.submit(batch, mode="auto", workspace=workspace, rules=WRITES).results(
        timeout=90
    )
    assert [r.status for r in results] == [
        Status.error,
        Status.error,
        Status.timeout,
        Status.ok,
        Status.ok,
    ], [r.model_message for r in results]
    died, refused, slow = results[:3]
    assert died.error.kind == "mcp_server_died" and "closed the connection" in died.model_message
    assert refused.error.kind == "mcp_unavailable"
    assert "exited before it answered" in refused.model_message
    assert "refusing to start" in refused.model_message
    assert "did not answer within 3 s" in slow.model_message
    assert (workspace / "notes" / "log.txt").read_text() == "still here\n"


def test_an_anthropic_message_calling_mcp_tools_gets_its_tool_results(mcp_stack, workspace):
    message = anthropic_message(
        {"type": "text", "text": "Checking the name first."},
        # `tool_use()` cannot say it: these tools' argument is called `name` too.
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "notes__check_name",
            "input": {"name": "Groceries"},
        },
        {
            "type": "tool_use",
            "id": "toolu_2",
            "name": "notes__read_note",
            "input": {"name": "groceries"},
        },
    )
    handle = mcp_stack.submit_message(message, mode="auto", workspace=workspace)
    reply = handle.reply(timeout=60)
    assert same_after_validation(MessageParam, reply)
    first, second = reply["content"]
    assert (first["tool_use_id"], first["is_error"]) == ("toolu_1", True)
    assert "note names are lowercase; try 'groceries'" in first["content"]
    assert (second["tool_use_id"], second["is_error"]) == ("toolu_2", False)
    assert json.loads(second["content"]) == {"name": "groceries", "text": "", "lines": 0}
