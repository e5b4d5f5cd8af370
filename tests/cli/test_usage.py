"""`toolrun usage` as a user runs it, on a ledger of its own (no Redis, no
workers): a table or JSON rows per key, tool, workspace, day, batch or status,
and bad input as one line."""

from __future__ import annotations

import json

import pytest

from runtime.ledger.store import Ledger
from runtime.types import Batch, Status, ToolCall, ToolResult, Usage
from tests.support.cli import assert_one_line_error, toolrun, toolrun_env

LONG_NAME = "mcp__github__list_pull_request_review_comments_for_repo"  # an MCP tool's name


@pytest.fixture
def env(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = Ledger(url)
    batch = Batch(
        calls=[
            ToolCall(id="a", name="echo"),
            ToolCall(id="b", name="fetch"),
            ToolCall(id="c", name=LONG_NAME),
        ]
    )
    ledger.record_batch(batch, columns={"submitter": "key:ann", "input_tokens": 9})
    for call_id, tool, status, usage in (
        ("a", "echo", Status.ok, Usage(wall_ms=2000.0, cpu_ms=250.0, cost=0.5)),
        ("b", "fetch", Status.over_budget, None),
        ("c", LONG_NAME, Status.ok, Usage(wall_ms=1000.0, cpu_ms=100.0, cost=0.25)),
    ):
        result = ToolResult(
            call_id=call_id, tool=tool, status=status, model_message="m", summary="s", usage=usage
        )
        ledger.record_result(batch.id, result)
    ledger.close()
    return toolrun_env(tmp_path / "home", TOOLRUN_DATABASE_URL=url)


def test_usage_by_tool_as_json(env):
    done = toolrun("usage", "--by", "tool", "--since", "7d", "--json", env=env)
    assert done.returncode == 0, done.stderr
    rows = {row["tool"]: row for row in json.loads(done.stdout)}
    assert (rows["echo"]["calls"], rows["echo"]["worker_seconds"], rows["echo"]["cost"]) == (
        1,
        2.0,
        0.5,
    )
    assert rows["fetch"]["ran"] == 0


def test_usage_per_key_as_a_table(env):
    done = toolrun("usage", env=env)
    assert done.returncode == 0, done.stderr
    assert "usage by key" in done.stdout and "key:ann" in done.stdout
    assert "9/0" in done.stdout  # the model's tokens in / out


def test_a_long_tool_name_is_printed_whole_on_an_80_column_pipe(env):
    """Piped, rich assumes 80 columns; the table grows past them rather than cut
    or wrap the names it is about."""
    done = toolrun("usage", "--by", "tool", env={**env, "COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if LONG_NAME in line]
    assert "1.000" in line, done.stdout  # the name's own row: its worker seconds beside it


@pytest.mark.parametrize(
    ("args", "says"),
    [(["--by", "colour"], "unknown --by 'colour'"), (["--since", "soon"], "give a span")],
)
def test_bad_options_are_one_line(env, args, says):
    done = toolrun("usage", *args, env=env)
    assert_one_line_error(done, says)
