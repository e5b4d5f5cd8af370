"""`toolrun run` and `toolrun ledger` against the session's real stack, through
the installed console script in a subprocess."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess

import pytest

from tests.support.cli import REPO, SCRIPT, stack_env, toolrun

pytestmark = pytest.mark.timeout(120)

FIELDS = {
    "call_id",
    "tool",
    "status",
    "model_message",
    "summary",
    "content",
    "error",
    "duration_ms",
    "worker",
    "attempts",
}
ANSI = re.compile(r"\x1b\[")
BATCH = [
    {"id": "r1", "name": "read_file", "arguments": {"path": "hello.txt"}},
    {"id": "r2", "name": "list_dir", "arguments": {"path": "."}},
    {"id": "w1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "fresh"}},
    {"id": "r3", "name": "read_file", "arguments": {"path": "notes.txt"}},
    {"id": "u1", "name": "no_such_tool", "arguments": {}},
    {"id": "i1", "name": "read_file", "arguments": {"path": None}},
    {"id": "d1", "name": "obliterate", "arguments": {"label": "x"}},
]
EXPECTED = {
    "r1": "ok",
    "r2": "ok",
    "w1": "ok",
    "r3": "ok",
    "u1": "unknown_tool",
    "i1": "invalid_arguments",
    "d1": "denied",
}


@pytest.fixture
def env(stack, user_settings):
    return stack_env(stack, user_settings)


@pytest.fixture
def batch(tmp_path, workspace):
    (workspace / "hello.txt").write_text("hello from the workspace\n")
    path = tmp_path / "batch.json"
    path.write_text(json.dumps({"calls": BATCH, "rules": {"allow": ["write_file"]}}))
    return path


def run_json(env, batch, workspace) -> dict:
    done = toolrun(
        "run", str(batch), "--mode", "auto", "--workspace", str(workspace), "--json", env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_run_json_prints_one_result_per_call_in_order(env, batch, workspace):
    payload = run_json(env, batch, workspace)
    assert set(payload) == {"batch_id", "results"}
    assert isinstance(payload["batch_id"], str) and payload["batch_id"]
    results = payload["results"]
    assert [r["call_id"] for r in results] == [call["id"] for call in BATCH]
    for result in results:
        assert set(result) >= FIELDS, sorted(FIELDS - set(result))
    assert {r["call_id"]: r["status"] for r in results} == EXPECTED
    by_id = {r["call_id"]: r for r in results}
    assert "fresh" in json.dumps(by_id["r3"]["content"])
    assert "hello from the workspace" in json.dumps(by_id["r1"]["content"])
    assert by_id["r1"]["worker"] and by_id["r1"]["attempts"] >= 1
    assert by_id["u1"]["error"]["kind"] and by_id["i1"]["error"]["message"]
    assert (workspace / "notes.txt").read_text() == "fresh"


def test_run_without_a_tty_prints_one_plain_line_per_call(env, batch, workspace):
    done = toolrun("run", str(batch), "--mode", "auto", "--workspace", str(workspace), env=env)
    assert done.returncode == 0, done.stderr
    assert not ANSI.search(done.stdout), done.stdout
    lines = done.stdout.splitlines()
    assert lines[0].startswith("batch ")
    statuses = {}
    for line in lines[1:]:
        call_id, status, *_ = line.split()
        statuses[call_id] = status
    assert len(lines[1:]) == len(BATCH) and statuses == EXPECTED


def test_the_mode_in_the_file_is_used_and_the_option_overrides_it(env, tmp_path, workspace):
    path = tmp_path / "plan.json"
    calls = [{"id": "w", "name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]
    path.write_text(json.dumps({"calls": calls, "mode": "plan"}))
    args = ("run", str(path), "--workspace", str(workspace), "--json")
    planned = json.loads(toolrun(*args, env=env).stdout)
    assert [r["status"] for r in planned["results"]] == ["disabled"]
    assert not (workspace / "x.txt").exists()
    overridden = json.loads(toolrun(*args, "--mode", "accept_edits", env=env).stdout)
    assert [r["status"] for r in overridden["results"]] == ["ok"]
    denied = json.loads(toolrun(*args, "--mode", "auto", "--deny", "write_file", env=env).stdout)
    assert [r["status"] for r in denied["results"]] == ["denied"]


def test_a_batch_none_of_whose_calls_ran_exits_non_zero(env, tmp_path, workspace):
    path = tmp_path / "none.json"
    calls = [
        {"id": "u1", "name": "no_such_tool", "arguments": {}},
        {"id": "w1", "name": "write_file", "arguments": {"path": "x.txt", "content": "x"}},
    ]
    path.write_text(json.dumps({"calls": calls, "mode": "plan"}))
    done = toolrun("run", str(path), "--workspace", str(workspace), "--json", env=env)
    assert done.returncode == 1, done
    statuses = [r["status"] for r in json.loads(done.stdout)["results"]]
    assert statuses == ["unknown_tool", "disabled"]  # the results are printed all the same
    assert done.stderr.splitlines() == [
        "toolrun: none of the batch's 2 calls ran (unknown_tool 1, disabled 1)"
    ]
    ran = path.with_name("one.json")
    ran.write_text(json.dumps({"calls": calls[:1] + BATCH[:1], "mode": "plan"}))
    (workspace / "hello.txt").write_text("hello\n")
    done = toolrun("run", str(ran), "--workspace", str(workspace), "--json", env=env)
    assert done.returncode == 0 and done.stderr == "", done


def test_a_workspace_that_is_not_a_directory_is_one_line(env, batch, tmp_path):
    done = toolrun("run", str(batch), "--workspace", str(tmp_path / "absent"), env=env)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("toolrun: ")
    assert "absent" in done.stderr


def test_ledger_json_holds_decisions_and_outcomes(env, batch, workspace):
    batch_id = run_json(env, batch, workspace)["batch_id"]
    done = toolrun("ledger", batch_id, "--json", env=env)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows and all(row["batch_id"] == batch_id for row in rows)
    kinds = {(row["call_id"], row["kind"]) for row in rows}
    for call_id in ("r1", "w1", "r3"):
        assert {(call_id, "decision"), (call_id, "finished")} <= kinds, call_id
    assert ("u1", "lookup_failed") in kinds
    assert {row["call_id"] for row in rows} >= set(EXPECTED)
    decision = next(r for r in rows if r["call_id"] == "d1" and r["kind"] == "decision")
    assert decision["effect"] == "deny" and decision["mode"] == "auto"
    ids = [row["id"] for row in rows]
    assert ids == sorted(ids)


def test_ledger_without_a_tty_prints_one_plain_line_per_row(env, batch, workspace):
    batch_id = run_json(env, batch, workspace)["batch_id"]
    rows = json.loads(toolrun("ledger", batch_id, "--json", env=env).stdout)
    done = toolrun("ledger", batch_id, env=env)
    assert done.returncode == 0, done.stderr
    assert not ANSI.search(done.stdout), done.stdout
    lines = done.stdout.splitlines()
    assert len(lines) == len(rows)
    for line, row in zip(lines, rows, strict=True):
        assert line.split()[0] == str(row["id"]) and row["kind"] in line.split()


@pytest.mark.skipif(SCRIPT is None, reason="no installed toolrun script")
def test_run_on_a_tty_shows_a_live_table(env, batch, workspace):
    """The rich display path: a terminal gets a table, not plain lines."""
    controller, terminal = pty.openpty()
    argv = [SCRIPT, "run", str(batch), "--mode", "auto", "--workspace", str(workspace)]
    tty_env = {**env, "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50"}
    tty_env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        argv, cwd=REPO, env=tty_env, stdin=terminal, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    screen = b""
    try:
        while True:
            ready, _, _ = select.select([controller], [], [], 90)
            if not ready:
                break
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            screen += chunk
        assert process.wait(timeout=30) == 0, screen.decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    text = screen.decode(errors="replace")
    assert "Traceback" not in text
    assert "status" in text and "summary" in text
    for call_id, status in EXPECTED.items():
        assert call_id in text and status in text
