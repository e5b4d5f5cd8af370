"""Workers lost in the middle of a batch (SIGKILL: no warm shutdown, no ack),
and tools that crash their own process: every call still gets exactly one
result, no side effect runs twice, reads run again and succeed.

A stack of its own per module: a 3-second visibility timeout, so Redis hands a
dead worker's messages to another one soon, and replacement workers. The
SIGKILL tests run with RabbitMQ as the broker too (TOOLRUN_TEST_AMQP_URL)."""

from __future__ import annotations

from collections import Counter

import pytest

from runtime.types import Status
from tests.support.faults import FaultStack
from tests.support.rabbitmq import BROKERS, broker_for
from tests.support.tools import marks, release
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]
ALLOW = {"allow": ["bump", "slow_bump", "crash_effect", "hog", "held_write"]}
# A busy machine may keep a rerun read running past the 3 s visibility timeout,
# which delivers it once more: three deliveries leave room for that.
MAX_DELIVERIES = 3
ON_REDIS = pytest.mark.parametrize("module_stack", ["redis"], indirect=True)


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture(scope="module")
def module_stack(request, tmp_path_factory, user_settings):
    """Redis as the broker, unless a test asks for each of `BROKERS` (indirectly).
    A test on Redis alone asks for "redis" too (`ON_REDIS`): a test that names
    no broker would get a second stack on Redis, not this one."""
    with broker_for(getattr(request, "param", "redis")) as broker_url:
        home = tmp_path_factory.mktemp("faults-workers")
        with FaultStack(
            home, user_settings=user_settings, max_deliveries=MAX_DELIVERIES, broker_url=broker_url
        ) as stack:
            with stack.client() as runtime:
                yield stack, runtime


@pytest.fixture
def faulty(module_stack):
    """The module's stack with one live worker per queue (a test may have killed some)."""
    stack, runtime = module_stack
    for queue in ("reads", "effects"):
        if not stack.workers(queue):
            stack.add_worker(queue)
    return stack, runtime


def started(workspace) -> Counter:
    """How often each held read started (a read's ledger rows land when it ends)."""
    return Counter(m["call_id"] for m in marks(workspace, "held"))


def by_id(results) -> dict:
    return {r.call_id: r for r in results}


@pytest.mark.parametrize("module_stack", BROKERS, indirect=True)
def test_sigkill_of_a_reads_worker_mid_batch_reruns_its_reads(faulty, workspace, request):
    stack, runtime = faulty
    request.addfinalizer(lambda: release(workspace, "reads"))
    # Reads that run until released: the kill provably comes while four of them run.
    reads = [call(f"r{i}", "held", label="reads") for i in range(6)]
    batch = [*reads, call("w1", "bump", label="w1"), call("r9", "nap", label="after")]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=45)
    wait_for(lambda: len(started(workspace)) >= 4, what="4 reads running")
    [victim] = stack.workers("reads")
    stack.kill_worker(victim)
    replacement = stack.add_worker("reads")
    release(workspace, "reads")

    results = by_id(handle.results(timeout=50))
    assert set(results) == {c["id"] for c in batch}
    assert all(r.status is Status.ok for r in results.values()), [
        (r.call_id, r.status, r.model_message) for r in results.values() if not r.ok
    ]
    rerun = {c for c, n in started(workspace).items() if n > 1}
    assert rerun, "no read ran a second time"
    events = runtime.ledger.events(handle.batch_id)
    redelivered = {e.call_id for e in events if e.kind == "started" and e.attempt > 1}
    assert rerun <= redelivered, "a rerun read's start does not show its delivery"
    assert {results[c].worker for c in rerun} == {replacement["name"]}
    assert all(results[c].attempts >= 2 for c in rerun)  # more if it outlived the visibility
    assert [m["label"] for m in marks(workspace, "effects")] == ["w1"]


@pytest.mark.parametrize("module_stack", BROKERS, indirect=True)
@pytest.mark.parametrize("crash", ["whole worker", "pool process"])
def test_sigkill_of_an_effects_worker_mid_call_never_runs_it_twice(faulty, workspace, crash):
    stack, runtime = faulty
    batch = [
        call("w1", "bump", label="w1"),
        call("w2", "held_write", label="w2"),  # runs until released: killed mid-call
        call("r1", "nap", label="r1"),
        call("w3", "bump", label="w3"),
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=45
    )
    running = wait_for(
        lambda: [m for m in marks(workspace, "effects") if m["label"] == "w2"], what="w2 running"
    )
    [victim] = stack.workers("effects")
    if crash == "whole worker":
        stack.kill_worker(victim)
        stack.add_worker("effects")
    else:
        stack.kill_pool_process(running[0]["pid"])

    results = by_id(handle.results(timeout=50))
    assert [r.call_id for r in handle.results()] == ["w1", "w2", "r1", "w3"]
    assert results["w2"].status is Status.outcome_unknown, results["w2"].model_message
    assert "may or may not have run" in results["w2"].model_message
    assert all(results[c].ok for c in ("w1", "r1", "w3"))
    effects = Counter(m["label"] for m in marks(workspace, "effects"))
    assert effects == {"w1": 1, "w2": 1, "w3": 1}
    rows = {c.call_id: c.status for c in runtime.ledger.calls(handle.batch_id)}
    assert rows["w2"] == "outcome_unknown"


@ON_REDIS
def test_a_tool_that_kills_its_prefork_process_costs_only_its_call(faulty, workspace):
    stack, runtime = faulty
    batch = [
        call("w1", "bump", label="w1"),
        call("x", "crash_effect", label="x"),
        call("r1", "nap", label="r1"),
        call("w2", "bump", label="w2"),
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=45
    )
    results = by_id(handle.results(timeout=50))
    assert results["x"].status is Status.outcome_unknown, results["x"].model_message
    assert all(results[c].ok for c in ("w1", "r1", "w2"))
    assert Counter(m["label"] for m in marks(workspace, "effects")) == {"w1": 1, "x": 1, "w2": 1}


@ON_REDIS
def test_a_read_that_kills_its_pool_process_is_given_up_after_max_deliveries(faulty, workspace):
    """Reads run on prefork too: the tool kills only its pool process, the
    worker requeues its message and replaces the process; each delivery up to
    `MAX_DELIVERIES` kills that one too, and the next is refused. The worker
    itself lives."""
    stack, runtime = faulty
    batch = [
        *[call(f"r{i}", "nap", label=f"n{i}", seconds=0.2) for i in range(3)],
        call("x", "crash_read", label="x", seconds=1.0),
        call("w1", "bump", label="w1"),
        call("r9", "nap", label="after"),
    ]
    with stack.keep_workers("reads") as supervisor:
        handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=50)
        results = by_id(handle.results(timeout=55))
    assert results["x"].status is Status.error, results["x"].model_message
    assert f"delivered {MAX_DELIVERIES} times" in results["x"].model_message
    assert all(results[c].ok for c in ("r0", "r1", "r2", "w1", "r9")), [
        (r.call_id, r.status, r.model_message) for r in results.values()
    ]
    crashes = [m for m in marks(workspace, "runs") if m["tool"] == "crash_read"]
    assert len(crashes) == MAX_DELIVERIES
    assert supervisor.spawned == 0  # no worker died
    assert [m["label"] for m in marks(workspace, "effects")] == ["w1"]


@ON_REDIS
def test_a_tool_that_runs_out_of_memory_costs_only_its_call(faulty, workspace):
    stack, runtime = faulty
    batch = [
        call("h", "hog", label="h"),
        call("w1", "bump", label="w1"),
        call("r", "nap", label="r"),
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=45
    )
    results = by_id(handle.results(timeout=50))
    assert results["h"].status is Status.error and results["h"].error.kind == "MemoryError"
    assert results["w1"].ok and results["r"].ok
