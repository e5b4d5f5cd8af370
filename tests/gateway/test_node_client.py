"""A real non-Python client: `agent_loop.mjs` on the machine's `node`, with its
built-in fetch and no npm packages, runs three turns against a gateway in
another process, answering an approval with an approver key; and the HTTP
how-to's JavaScript block, as it is, runs a turn against the gateway its
`stack.json` names."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.ledger.tables import EventKind
from tests.integration.test_readme import fenced
from tests.support.cli import REPO

NODE = shutil.which("node")
SCRIPT = Path(__file__).with_name("agent_loop.mjs")


@pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")
def test_a_node_agent_loop_runs_three_turns_with_an_approval(gateway, keys, space):
    (space / "README.md").write_text("a workspace for node\n")
    env = {
        "GATEWAY_URL": gateway.url,
        "SUBMITTER_KEY": keys["submitter"],
        "APPROVER_KEY": keys["approver"],
        "WORKSPACE": str(space),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run([NODE, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    first, second, third = out["turns"]
    assert first["results"] == [{"call_id": "toolu_1", "status": "ok"}]
    assert second["notices"] == ["toolu_2"]
    assert second["approvedBy"] == ["test_node_client-bob"]
    assert second["results"] == [{"call_id": "toolu_2", "status": "ok"}]
    assert sorted(r["call_id"] for r in third["results"]) == ["toolu_3", "toolu_4"]
    replies = out["conversation"][2::2]
    assert [block["tool_use_id"] for block in replies[2]["content"]] == ["toolu_3", "toolu_4"]
    assert "seen by node" in json.dumps(replies[2]["content"][0])
    assert (space / "NOTES.md").read_text() == "seen by node\n"
    given = gateway.ledger.events(second["batch_id"], "toolu_2")
    assert [e.approver for e in given if e.kind == EventKind.approval_given] == [
        "test_node_client-bob"
    ]


# What a reader adds to the how-to's block: one turn that writes a file, which
# the approver key lets run.
TURN = """
import { runTurn } from "./agent.mjs";
const turn = { role: "assistant", content: [{ type: "tool_use", id: "toolu_w", name: "write_file",
  input: { path: "NOTES.md", content: "from the how-to\\n" } }] };
const { SUBMITTER_KEY, APPROVER_KEY, WORKSPACE } = process.env;
console.log(JSON.stringify(await runTurn(turn, SUBMITTER_KEY, APPROVER_KEY, WORKSPACE)));
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")
def test_the_how_tos_javascript_runs_a_turn_against_the_recorded_gateway(
    gateway, keys, space, tmp_path
):
    page = (REPO / "docs" / "how-to" / "http-api.md").read_text()
    [code] = [code for _, language, _, code in fenced(page) if language == "js"]
    (tmp_path / "agent.mjs").write_text(code)
    (tmp_path / "turn.mjs").write_text(TURN)
    home = tmp_path / "home"  # as `toolrun up` leaves it: the gateway on a port it picked
    home.mkdir()
    (home / "stack.json").write_text(json.dumps({"gateway": {"url": gateway.url}}))
    env = {
        "HOME": str(tmp_path),
        "TOOLRUN_HOME": str(home),
        "SUBMITTER_KEY": keys["submitter"],
        "APPROVER_KEY": keys["approver"],
        "WORKSPACE": str(space),
        "PATH": f"{Path(sys.prefix) / 'bin'}:/usr/bin:/bin",  # `toolrun home`
    }
    done = subprocess.run(
        [NODE, "turn.mjs"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert [block["tool_use_id"] for block in reply["content"]] == ["toolu_w"], reply
    assert (space / "NOTES.md").read_text() == "from the how-to\n"
