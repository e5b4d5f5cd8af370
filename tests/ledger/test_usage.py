"""Usage rolled up in the ledger: one usage row per call end, written with it,
summed per batch, submitter, tool, workspace, day and status, with the
model's tokens of the batches, on SQLite (and PostgreSQL when given one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runtime.ledger.ends import CallEnd
from runtime.ledger.usage import tally
from runtime.types import Batch, Status, ToolCall, ToolResult, Usage
from tests.support.postgres import own_ledger


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request, tmp_path):
    """A ledger of the test's own: rollups sum every row there is."""
    with own_ledger(request.param, tmp_path) as store:
        yield store


def _result(call_id: str, tool: str, status: Status = Status.ok, **usage) -> ToolResult:
    return ToolResult(
        call_id=call_id,
        tool=tool,
        status=status,
        model_message="m",
        summary="s",
        usage=Usage(**usage) if usage else None,
    )


def _batch(store, who: str, workspace: str, tools: list[str], **columns) -> Batch:
    batch = Batch(
        calls=[ToolCall(id=f"c{i}", name=t) for i, t in enumerate(tools)], workspace=workspace
    )
    store.record_batch(batch, columns={"submitter": who, **columns})
    return batch


def test_usage_rolls_up_by_submitter_tool_workspace_day_and_status(ledger):
    one = _batch(ledger, "key:ann", "/w/a", ["echo", "echo", "fetch"], input_tokens=100)
    two = _batch(ledger, "key:bob", "/w/b", ["echo"], output_tokens=7)
    spent = {"wall_ms": 1500.0, "cpu_ms": 500.0, "queue_ms": 20.0, "cost": 0.25}
    ledger.record_result(one.id, _result("c0", "echo", reported={"usd": 0.5}, **spent))
    ledger.record_result(one.id, _result("c1", "echo", wall_ms=500.0, approval_ms=3000.0))
    ledger.record_result(one.id, _result("c2", "fetch", Status.over_budget))
    ledger.record_end(CallEnd(two.id, _result("c0", "echo", reported={"usd": 1.0}, **spent)))

    by_key = {r["key"]: r for r in ledger.usage("key")}
    ann = by_key["key:ann"]
    assert (ann["calls"], ann["ran"], ann["ok"]) == (3, 2, 2)
    assert (ann["worker_seconds"], ann["cpu_seconds"], ann["approval_seconds"]) == (2.0, 0.5, 3.0)
    assert ann["cost"] == 0.25 and ann["reported"] == {"usd": 0.5}
    assert (ann["input_tokens"], ann["output_tokens"]) == (100, None)
    assert by_key["key:bob"]["output_tokens"] == 7

    by_tool = {r["tool"]: r for r in ledger.usage("tool")}
    assert by_tool["echo"]["calls"] == 3 and by_tool["echo"]["reported"] == {"usd": 1.5}
    assert by_tool["fetch"]["ran"] == 0 and "input_tokens" not in by_tool["fetch"]
    assert {r["workspace"] for r in ledger.usage("workspace")} == {"/w/a", "/w/b"}
    (day,) = ledger.usage("day")
    assert day["day"] == datetime.now(UTC).date().isoformat() and day["calls"] == 4
    assert {r["status"]: r["calls"] for r in ledger.usage("status")} == {
        "ok": 3,
        "over_budget": 1,
    }
    assert [r["key"] for r in ledger.usage("key", submitter="key:bob")] == ["key:bob"]
    assert ledger.usage("key", since=datetime.now(UTC) + timedelta(hours=1)) == []
    total = ledger.batch_usage(one.id)
    assert (total["calls"], total["worker_seconds"], total["input_tokens"]) == (3, 2.0, 100)
    assert ledger.batch_usage("none")["calls"] == 0


def test_a_call_ended_twice_has_one_usage_row(ledger):
    batch = _batch(ledger, "p", "/w", ["echo"])
    assert ledger.record_result(batch.id, _result("c0", "echo", wall_ms=10.0))
    assert not ledger.record_result(batch.id, _result("c0", "echo", wall_ms=99.0))
    (row,) = ledger.usage("batch")
    assert (row["calls"], row["worker_seconds"]) == (1, 0.01)


def test_totals_count_every_call_by_tool_submitter_and_status(ledger):
    batch = _batch(ledger, "key:ann", "/w", ["echo", "echo"])
    ledger.record_result(batch.id, _result("c0", "echo", wall_ms=1000.0, cost=0.5))
    ledger.record_result(batch.id, _result("c1", "echo", Status.over_budget))
    rows = {(r["tool"], r["key"], r["status"]): r for r in ledger.usage_totals()}
    assert rows[("echo", "key:ann", "ok")] | {} == {
        "tool": "echo",
        "key": "key:ann",
        "status": "ok",
        "calls": 1,
        "worker_seconds": 1.0,
        "cost": 0.5,
    }
    assert rows[("echo", "key:ann", "over_budget")]["calls"] == 1


def test_a_tally_of_the_results_is_the_ledgers_rollup_of_their_ends(ledger):
    """The gateway answers a batch's `usage` from the results it returns: for
    the same ends it must be what the ledger sums, tokens, reports and all."""
    batch = _batch(ledger, "key:ann", "/w/a", ["echo", "echo", "fetch"], input_tokens=100)
    results = [
        _result("c0", "echo", reported={"usd": 0.5, "token=abc": 1}, wall_ms=1.5, cost=0.25),
        _result("c1", "echo", wall_ms=500.0, cpu_ms=3.25, queue_ms=2.0, approval_ms=3000.0),
        _result("c2", "fetch", Status.over_budget),
    ]
    tokens = {"input_tokens": 100, "output_tokens": None}
    assert tally([], tokens, ledger.redactor) == ledger.batch_usage(batch.id)
    for result in results:
        ledger.record_result(batch.id, result)
    assert tally(results, tokens, ledger.redactor) == ledger.batch_usage(batch.id)
    unpriced = _batch(ledger, "key:bob", "/w/b", ["echo"])
    ledger.record_result(unpriced.id, results[1])
    assert tally(results[1:2], {}, ledger.redactor) == ledger.batch_usage(unpriced.id)
