"""Consecutive ordered steps run as one chain (each worker starts the next):
the same results, order and skips as steps sent one by one from the client."""

from runtime.types import ApprovalRequested, Status
from tests.support.tools import held_running, marks, release
from tests.support.waiting import wait_for

WRITES = {"allow": ["bump", "explode", "slow_write", "held_write"]}


def call(call_id, name, **arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


def statuses(runtime, batch_id: str) -> dict[str, str]:
    """Each call's status as the ledger's call rows hold it now."""
    return {row.call_id: row.status for row in runtime.ledger.calls(batch_id)}


def labels(workspace) -> list[str]:
    return [m["label"] for m in sorted(marks(workspace, "effects"), key=lambda m: m["at"])]


def test_a_chain_runs_in_order_and_stops_at_its_first_failure(runtime, workspace):
    batch = [
        call("a", "bump", label="a"),
        call("b", "bump", label="b"),
        call("x", "explode", message="disk full"),
        call("c", "bump", label="c"),
        call("d", "bump", label="d"),
    ]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    results = handle.results(timeout=60)
    assert [r.status for r in results] == [
        Status.ok,
        Status.ok,
        Status.error,
        Status.skipped,
        Status.skipped,
    ]
    assert all("call x (explode) failed" in r.model_message for r in results[3:])
    assert labels(workspace) == ["a", "b", "explode"]
    want = {"a": "ok", "b": "ok", "x": "error", "c": "skipped", "d": "skipped"}
    # the client records a skip just after it hands it over
    wait_for(lambda: statuses(runtime, handle.batch_id) == want, 10, f"call rows {want}")


def test_under_continue_a_chain_runs_past_a_failure(runtime, workspace):
    batch = [
        call("a", "bump", label="a"),
        call("x", "explode"),
        call("b", "bump", label="b"),
        call("c", "bump", label="c"),
    ]
    results = runtime.submit(
        batch, mode="auto", workspace=workspace, on_error="continue", rules=WRITES
    ).results(timeout=60)
    assert [r.status for r in results] == [Status.ok, Status.error, Status.ok, Status.ok]
    assert labels(workspace) == ["a", "explode", "b", "c"]


def test_a_read_between_steps_sees_the_step_before_it(runtime, workspace):
    """Chains end at reads: the read runs after the write before it, and the
    write after it waits for the read."""
    batch = [
        call("a", "bump", label="a"),
        call("b", "bump", label="b"),
        call("r", "nap", label="r", seconds=0.2),
        call("c", "bump", label="c"),
    ]
    results = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES).results(60)
    assert all(r.ok for r in results)
    effects = {m["label"]: m["at"] for m in marks(workspace, "effects")}
    [nap] = marks(workspace, "intervals")
    assert effects["b"] <= nap["start"] and nap["end"] <= effects["c"]


def test_a_cancel_mid_chain_lets_the_running_step_end_and_runs_no_later_one(runtime, workspace):
    batch = [
        call("slow", "held_write", label="slow"),
        call("next", "bump", label="next"),
        call("last", "bump", label="last"),
    ]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES, timeout=40)
    held_running(workspace, 1)
    handle.cancel(by="test")  # while the first step runs: it holds until released
    release(workspace, "slow")
    results = {r.call_id: r for r in handle.results(timeout=30)}
    assert results["slow"].ok, results["slow"].model_message
    for call_id in ("next", "last"):
        assert results[call_id].status is Status.cancelled, results[call_id].model_message
        assert "did not run" in results[call_id].model_message
    assert labels(workspace) == ["slow"]


def test_steps_after_one_that_waits_for_approval_wait_with_it(runtime, workspace):
    batch = [
        call("a", "bump", label="a"),
        call("x", "slow_write", label="x"),
        call("b", "bump", label="b"),
        call("c", "bump", label="c"),
    ]
    handle = runtime.submit(batch, mode="default", workspace=workspace, rules={"allow": ["bump"]})
    stream = handle.stream(timeout=60)
    for event in stream:
        if event.call_id == "x" and isinstance(event, ApprovalRequested):
            break
    assert labels(workspace) == ["a"]  # and the order below shows b and c ran after x
    assert handle.approve("x", by="test")
    assert all(r.ok for r in handle.results(timeout=60))
    assert labels(workspace) == ["a", "x", "b", "c"]


def test_a_long_run_of_steps_goes_in_several_chains_in_order(runtime, workspace):
    batch = [call(f"s{i}", "bump", label=f"{i}") for i in range(40)]
    results = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES).results(60)
    assert all(r.ok for r in results)
    assert labels(workspace) == [str(i) for i in range(40)]
