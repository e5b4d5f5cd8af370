"""A chain in one task, on real workers (docs/architecture.md, "A chain in one
task"): consecutive allowed ordered steps run in one Celery task, in order,
each with its own claim, end and time limit. A step stuck in C code is killed
at its own limit and the steps after it are the cluster's; a worker killed
mid-chain leaves its unstarted steps to the cluster, and nothing runs twice;
the batch's deadline stops the chain between steps."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from runtime.types import Status
from tests.support.fault_tools import TIMEOUT
from tests.support.faults import FaultStack
from tests.support.tools import held_running, marks, release
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(150)]
KILL_GRACE = 1.0
ALLOW = {"allow": ["tagged_write", "held_write", "hold_gil_write", "bump"]}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture(scope="module")
def chained(tmp_path_factory, user_settings):
    home = tmp_path_factory.mktemp("chain-task")
    with FaultStack(
        home,
        user_settings=user_settings,
        effects_concurrency=2,
        kill_grace=KILL_GRACE,
        resend_after=4.0,  # a dead worker's unstarted steps go again within seconds
        visibility_timeout=3600.0,  # a running chain is not delivered twice meanwhile
    ) as stack:
        with stack.client() as runtime:
            yield stack, runtime


@pytest.fixture
def faulty(chained):
    stack, runtime = chained
    if not stack.workers("effects"):
        stack.add_worker("effects")
    return stack, runtime


def tasks(workspace) -> list[dict]:
    return sorted(marks(workspace, "tasks"), key=lambda m: m["at"])


def by_id(results) -> dict:
    return {r.call_id: r for r in results}


def test_a_chain_of_writes_runs_in_one_task_in_order_each_step_on_its_own(faulty, workspace):
    stack, runtime = faulty
    steps = [call(f"s{i}", "tagged_write", label=str(i)) for i in range(8)]
    handle = runtime.submit(steps, mode="auto", workspace=workspace, rules=ALLOW, timeout=60)
    results = handle.results(timeout=60)
    assert [r.status for r in results] == [Status.ok] * 8
    ran = tasks(workspace)
    assert [m["label"] for m in ran] == [str(i) for i in range(8)]  # in order, each once
    assert len({m["task"] for m in ran}) == 1 and ran[0]["task"]  # one Celery task
    events = runtime.ledger.events(handle.batch_id)
    for step in steps:  # its own claim (the started row) and its own end
        kinds = [e.kind for e in events if e.call_id == step["id"]]
        assert kinds.count("started") == 1 and kinds.count("finished") == 1, kinds
    ends = {e.call_id: e.at for e in events if e.kind == "finished"}
    starts = {e.call_id: e.at for e in events if e.kind == "started"}
    for before, after in zip(steps, steps[1:], strict=False):
        assert ends[before["id"]] <= starts[after["id"]]
    rows = {row.call_id: row for row in runtime.ledger.calls(handle.batch_id)}
    assert {row.status for row in rows.values()} == {"ok"}


@pytest.mark.parametrize("on_error", ["stop", "continue"])
def test_a_step_stuck_in_c_code_is_killed_at_its_own_limit(faulty, workspace, on_error):
    """The chain's task may run for the sum of its steps' limits (here more
    than 90 s); the stuck step is killed at its own (1.5 s), its end says so,
    and the steps after it are skipped, or run by the cluster, never by the
    killed task."""
    stack, runtime = faulty
    batch = [
        call("a", "tagged_write", label="a"),
        call("h", "hold_gil_write", label="h"),
        call("b", "tagged_write", label="b"),
        call("c", "tagged_write", label="c"),
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error=on_error, timeout=80
    )
    results = by_id(handle.results(timeout=80))
    stuck = results["h"]
    assert stuck.status is Status.outcome_unknown, stuck.model_message
    assert f"still running {TIMEOUT + KILL_GRACE:g} s" in stuck.model_message  # its own limit
    ran = {m["label"]: m["task"] for m in tasks(workspace)}
    if on_error == "stop":
        assert [results[c].status for c in "bc"] == [Status.skipped] * 2
        assert set(ran) == {"a"}
    else:
        assert all(results[c].ok for c in "abc"), [results[c].model_message for c in "abc"]
        assert set(ran) == {"a", "b", "c"}
        assert ran["b"] != ran["a"]  # handed on as a task of its own: the first was killed
    assert Counter(m["label"] for m in marks(workspace, "runs")) == {"h": 1}
    row = {r.call_id: r.status for r in runtime.ledger.calls(handle.batch_id)}
    assert row["h"] == "outcome_unknown"


@pytest.mark.parametrize("crash", ["whole worker", "pool process"])
def test_a_worker_killed_mid_chain_leaves_its_unstarted_steps_to_the_cluster(
    faulty, workspace, crash
):
    stack, runtime = faulty
    batch = [
        call("a", "bump", label="a"),
        call("h", "held_write", label="h"),  # runs until released: killed mid-call
        call("b", "bump", label="b"),
        call("c", "bump", label="c"),
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=80
    )
    [running] = held_running(workspace, 1)
    [victim] = stack.workers("effects")
    if crash == "whole worker":
        stack.kill_worker(victim)
        stack.add_worker("effects")
    else:
        stack.kill_pool_process(running["pid"])
    release(workspace, "h")  # a copy run again would finish at once: it must not run

    results = by_id(handle.results(timeout=80))
    assert [r.call_id for r in handle.results()] == ["a", "h", "b", "c"]
    assert results["h"].status is Status.outcome_unknown, results["h"].model_message
    assert all(results[c].ok for c in "abc"), [results[c].model_message for c in "abc"]
    assert Counter(m["label"] for m in marks(workspace, "effects")) == {
        "a": 1,
        "h": 1,
        "b": 1,
        "c": 1,
    }
    rows = {r.call_id: r.status for r in runtime.ledger.calls(handle.batch_id)}
    assert rows == {"a": "ok", "h": "outcome_unknown", "b": "ok", "c": "ok"}


def test_the_deadline_stops_a_chain_between_steps(faulty, workspace):
    """The deadline passes while a step runs: the sweep ends it and the steps
    not started; the chain's task, once the step returns, runs no more."""
    stack, runtime = faulty
    batch = [call("h", "held_write", label="h"), call("b", "bump", label="b")]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=2)
    held_running(workspace, 1)
    results = by_id(handle.results(timeout=60))
    assert results["h"].status is Status.outcome_unknown, results["h"].model_message
    assert results["b"].status is Status.skipped, results["b"].model_message
    release(workspace, "h")
    # the task goes on to b once h returns: it must not run it
    wait_for(
        lambda: [m for m in marks(workspace, "released") if m["label"] == "h"], 30, "h released"
    )
    time.sleep(2.0)  # what is asserted is that nothing happens: give it the time to
    assert [m["label"] for m in marks(workspace, "effects")] == ["h"]
