"""Budgets held at admission and again right before the tool runs, on the
in-process transport (the same code as the cluster's, its counters in memory;
tests/integration/test_usage.py holds them in Redis): the call that would
pass a budget ends `over_budget`, says so, and a ledger row names the budget
and its file."""

from __future__ import annotations

import json
import time
from pathlib import Path

from runtime import Risk, ToolInput, ToolOutput, tool
from runtime.ledger.tables import EventKind
from runtime.settings import Settings
from runtime.testing import memory_runtime
from runtime.types import Status


class Nap(ToolInput):
    seconds: float = 0.0


@tool(risk=Risk.read, idempotent=True)
def look(args: Nap, ctx) -> ToolOutput:
    return ToolOutput(content=None, message="looked", summary="looked", spent={"lookups": 2})


@tool(risk=Risk.write)
def slow_change(args: Nap, ctx) -> ToolOutput:
    time.sleep(args.seconds)
    return ToolOutput(content=None, message="changed", summary="changed")


def settings_with(tmp_path: Path, policy: dict) -> Settings:
    org, user = tmp_path / "org.json", tmp_path / "user.json"
    org.write_text(json.dumps(policy))
    user.write_text(json.dumps({"trusted_workspaces": [str(tmp_path)]}))
    return Settings(home=tmp_path / "home", policy_file=org, user_settings_file=user)


def calls(name: str, count: int, **arguments) -> list[dict]:
    return [{"id": f"c{i}", "name": name, "arguments": arguments} for i in range(count)]


def test_the_call_that_would_pass_a_calls_budget_is_refused_at_admission(tmp_path):
    budget = {"name": "three", "per": "key", "window": "day", "calls": 3}
    settings = settings_with(
        tmp_path,
        {"limits": {"budget": [budget]}, "prices": {"look": {"per_call": 0.01}}},
    )
    with memory_runtime(look, settings=settings) as rt:
        first = rt.submit(calls("look", 2), mode="auto", workspace=tmp_path, submitter="ann")
        assert [r.status for r in first.results(timeout=30)] == [Status.ok, Status.ok]
        second = rt.submit(calls("look", 2), mode="auto", workspace=tmp_path, submitter="ann")
        ran, refused = second.results(timeout=30)
        assert ran.status is Status.ok
        assert refused.status is Status.over_budget
        assert "budget 'three' (3 calls per key per day" in refused.model_message
        assert "3 calls used, 0 calls left" in refused.model_message
        assert refused.content["retry_after_s"] > 0 and refused.content["budget"] == "three"
        decision = [
            e for e in rt.ledger.events(second.batch_id, refused.call_id) if e.rule is not None
        ]
        assert [(e.kind, e.rule, e.source) for e in decision] == [
            (EventKind.decision.value, "budget:three", str(settings.policy_file))
        ]
        # Another submitter has a budget of its own.
        other = rt.submit(calls("look", 1), mode="auto", workspace=tmp_path, submitter="bob")
        assert other.results(timeout=30)[0].ok
        # What the calls cost: each ran call's usage, and the batch's total.
        assert ran.usage.price_per_call == 0.01 and ran.usage.reported == {"lookups": 2}
        assert refused.usage is None
        total = second.usage()
        assert (total["calls"], total["ran"], total["ok"]) == (2, 1, 1)
        assert total["reported"] == {"lookups": 2}
        assert abs(total["cost"] - ran.usage.cost) < 1e-9


def test_time_spent_since_admission_refuses_a_call_right_before_it_runs(tmp_path):
    """A worker-seconds budget passes every call at admission (none has spent
    anything yet); the first one's time spends it, so the worker refuses the next."""
    budget = {"name": "turn", "per": "batch", "worker_seconds": 0.2}
    settings = settings_with(tmp_path, {"limits": {"budget": [budget]}})
    with memory_runtime(slow_change, settings=settings) as rt:
        rt_calls = calls("slow_change", 3, seconds=0.3)
        handle = rt.submit(rt_calls, mode="bypass", workspace=tmp_path, on_error="continue")
        statuses = [r.status for r in handle.results(timeout=30)]
        assert statuses == [Status.ok, Status.over_budget, Status.over_budget]
        refused = handle.results()[1]
        assert "It lasts the batch" in refused.model_message
        assert refused.content["used"] >= 0.3 and refused.content["left"] == 0
        assert handle.usage()["worker_seconds"] >= 0.3
        rows = [(e.rule, e.source, e.effect) for e in rt.ledger.events(handle.batch_id, "c1")]
        assert rows[0] == ("mode:bypass", "mode", "allow")  # admitted,
        assert rows[-1] == ("budget:turn", str(settings.policy_file), "deny")  # then refused
