"""The batch's rules (ordering, on_error, cancel, deadline, approvals, chains,
one result per call) on the in-memory transport: the same `Runtime`, batch
and executor code as on Celery, with the workers on threads of this process
and the ledger a real SQLite file. tests/integration/ runs them on real Redis
and worker processes."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from runtime.client.handle import BatchHandle
from runtime.client.intake import keyed_id
from runtime.client.run import BatchRun
from runtime.errors import KeyConflict
from runtime.types import ApprovalRequested, Batch, Status, ToolCall
from tests.support.tools import held_running, marks, release

WRITES = {"allow": ["bump", "slow_write", "held_write", "explode", "obliterate"]}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def labels(workspace) -> list[str]:
    return [mark["label"] for mark in marks(workspace, "effects")]


def test_reads_between_side_effects_see_them_in_the_models_order(rt, workspace):
    batch = [
        call("r1", "nap", label="a"),
        call("r2", "nap", label="b"),
        call("w", "bump", label="w"),
        call("r3", "nap", label="c"),
    ]
    results = rt.submit(batch, mode="auto", workspace=workspace, rules=WRITES).results(10)
    assert [r.status for r in results] == [Status.ok] * 4
    spans = {m["label"]: m for m in marks(workspace, "intervals")}
    bumped = marks(workspace, "effects")[0]["at"]
    assert spans["a"]["end"] <= bumped and spans["b"]["end"] <= bumped
    assert spans["c"]["start"] >= bumped


def test_stop_skips_later_side_effects_and_still_runs_reads(rt, workspace):
    batch = [call("w1", "explode"), call("r", "nap", label="r"), call("w2", "bump", label="x")]
    results = rt.submit(batch, mode="auto", workspace=workspace, rules=WRITES).results(10)
    assert [r.status for r in results] == [Status.error, Status.ok, Status.skipped]
    assert "call w1 (explode) failed before it" in results[2].model_message
    assert labels(workspace) == ["explode"]


def test_continue_runs_every_step(rt, workspace):
    batch = [call("w1", "explode"), call("w2", "bump", label="x"), call("w3", "bump", label="y")]
    handle = rt.submit(batch, mode="auto", workspace=workspace, rules=WRITES, on_error="continue")
    assert [r.status for r in handle.results(10)] == [Status.error, Status.ok, Status.ok]
    assert labels(workspace) == ["explode", "x", "y"]


def test_a_chain_runs_its_steps_in_order_and_a_failure_breaks_it(rt, workspace):
    batch = [call(f"w{i}", "bump", label=str(i)) for i in range(3)]
    batch += [call("boom", "explode"), call("after", "bump", label="after")]
    handle = rt.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    results = handle.results(10)
    assert [r.status for r in results] == [Status.ok] * 3 + [Status.error, Status.skipped]
    assert labels(workspace) == ["0", "1", "2", "explode"]
    chained = [m for m in rt._transport.taken if m.batch_id == handle.batch_id]
    assert len(chained[0].then) == 4  # one message carried the chain; workers handed it on


def test_every_early_end_is_one_result_in_the_models_order(rt, workspace):
    batch = [
        call("a", "nope"),
        call("b", "bump", label=None),
        call("c", "obliterate", label="x"),
        call("d", "nap", label="ok"),
    ]
    handle = rt.submit(batch, mode="auto", workspace=workspace, on_error="continue")
    streamed = list(handle.stream(10))
    assert sorted(r.call_id for r in streamed) == ["a", "b", "c", "d"]
    assert [r.status for r in handle.results()] == [
        Status.unknown_tool,
        Status.invalid_arguments,
        Status.denied,
        Status.ok,
    ]


def test_cancel_ends_what_has_not_started_and_lets_the_running_step_finish(rt, workspace):
    batch = [call("w1", "held_write", label="slow"), call("w2", "bump", label="x")]
    handle = rt.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    held_running(workspace, 1)
    handle.cancel(by="test")  # while w1 runs: it runs until released
    release(workspace, "slow")
    results = handle.results(10)
    assert [r.status for r in results] == [Status.ok, Status.cancelled]
    assert labels(workspace) == ["slow"]


def test_the_deadline_ends_a_running_read_and_skips_what_did_not_start(rt, workspace, request):
    request.addfinalizer(lambda: release(workspace, "long"))  # runs past the deadline
    batch = [call("r", "held", label="long"), call("w", "bump", label="x")]
    results = rt.submit(batch, mode="auto", workspace=workspace, rules=WRITES, timeout=0.3)
    assert [r.status for r in results.results(10)] == [Status.timeout, Status.skipped]
    assert labels(workspace) == []


def test_approved_calls_run_in_order_and_each_waits_for_its_answer(rt, workspace):
    batch = [call("w1", "bump", label="first"), call("w2", "bump", label="second")]
    handle = rt.submit(batch, mode="default", workspace=workspace)
    stream = handle.stream(10)
    for call_id in ("w1", "w2"):
        notice = next(stream)
        assert notice == ApprovalRequested(call_id=call_id, tool="bump", reason=notice.reason)
        assert len(labels(workspace)) == int(call_id[1]) - 1  # nothing after it ran yet
        assert handle.approve(call_id, by="alice")
        assert next(stream).status is Status.ok
    assert labels(workspace) == ["first", "second"]
    given = [e for e in rt.ledger.events(handle.batch_id) if e.kind == "approval_given"]
    assert [(e.call_id, e.approver) for e in given] == [("w1", "alice"), ("w2", "alice")]


def test_approvals_refused_updated_and_expired(rt, workspace):
    batch = [call("a", "bump", label="a"), call("b", "bump", label="b")]
    handle = rt.submit(batch, mode="default", workspace=workspace, on_error="continue")
    threading.Thread(target=lambda: _answer(rt, handle), daemon=True).start()
    results = handle.results(10)
    assert [r.status for r in results] == [Status.denied, Status.ok]
    assert "refused it: not this one" in results[0].model_message
    assert labels(workspace) == ["edited"]


def _answer(rt, handle) -> None:
    for call_id, answer in (("a", "deny"), ("b", "approve")):
        while not rt.deployment.approvals.get(handle.batch_id, call_id):
            time.sleep(0.01)
        if answer == "deny":
            handle.deny(call_id, "not this one", by="bob")
        else:
            handle.approve(call_id, by="bob", updated_arguments={"label": "edited"})


def test_an_unanswered_approval_expires_and_its_call_is_denied(rt, workspace):
    rt._services = dataclasses.replace(rt._services, approval_timeout=0.2)
    handle = rt.submit([call("a", "bump", label="a")], mode="default", workspace=workspace)
    [result] = handle.results(10)
    assert result.status is Status.denied and "approval timed out" in result.model_message
    assert rt.deployment.approvals.get(handle.batch_id, "a").status == "expired"
    assert not handle.approve("a", by="late")  # an expired approval cannot be answered
    assert labels(workspace) == []


def test_a_refused_read_does_not_hold_its_stage_back(rt, workspace):
    """A refused call ends at submit and never reaches a worker: the stage moves
    on when the worker ends the last call that was sent (not 15 s later, when
    the sweep would find the batch)."""
    batch = [
        call("r", "nap", label="a"),
        call("bad", "nap", label=None),
        call("w", "bump", label="w"),
    ]
    results = rt.submit(batch, mode="auto", workspace=workspace, rules=WRITES).results(5)
    assert [r.status for r in results] == [Status.ok, Status.invalid_arguments, Status.ok]
    assert labels(workspace) == ["w"]


def _rows(rt, batch_id: str) -> list[tuple]:
    return [(e.call_id, e.kind, e.effect, e.status) for e in rt.ledger.events(batch_id)]


@pytest.mark.parametrize("change", ["rules", "mode", "workspace", "on_error", "calls"])
def test_a_key_again_with_another_batch_is_refused_before_anything_is_written(
    rt, workspace, tmp_path, change
):
    calls = [call("w", "bump", label="w")]
    first = {"mode": "auto", "workspace": workspace, "rules": WRITES, "on_error": "stop"}
    handle = rt.submit(calls, key=f"turn-{change}", **first)
    assert [r.status for r in handle.results(10)] == [Status.ok]
    written = _rows(rt, handle.batch_id)
    (tmp_path / "elsewhere").mkdir()
    others = {
        "rules": {"deny": ["bump"]},
        "mode": "default",
        "workspace": tmp_path / "elsewhere",
        "on_error": "continue",
        "calls": [call("w", "bump", label="v")],
    }
    again = {**first, change: others[change]}
    with pytest.raises(KeyConflict, match=f"other {change}") as refused:
        rt.submit(again.pop("calls", calls), key=f"turn-{change}", **again)
    assert change in refused.value.differs
    assert _rows(rt, handle.batch_id) == written
    assert labels(workspace) == ["w"]


def test_a_key_again_with_the_same_batch_attaches_and_writes_nothing(rt, workspace):
    calls = [call("w", "bump", label="w"), call("r", "nap", label="r")]
    options = {"mode": "auto", "workspace": workspace, "rules": WRITES, "key": "turn-same"}
    handle = rt.submit(calls, **options)
    assert [r.status for r in handle.results(10)] == [Status.ok] * 2
    written = _rows(rt, handle.batch_id)
    again = rt.submit(calls, **options)
    assert again.batch_id == handle.batch_id
    assert [r.status for r in again.results(10)] == [Status.ok] * 2
    assert _rows(rt, handle.batch_id) == written
    assert labels(workspace) == ["w"]


def test_a_submitter_that_loses_the_race_for_its_key_writes_and_sends_nothing(rt, workspace):
    """Both submitters passed the check for a known key; the second to record
    finds the batch there (the insert of its row is the compare-and-set)."""
    calls = [ToolCall(id="w", name="bump", arguments={"label": "w"})]
    batch = Batch(id=keyed_id("raced"), calls=calls, workspace=str(Path(workspace).resolve()))
    allow = rt.policies.policy_for(Path(batch.workspace), WRITES)
    winner = BatchRun(batch, rt._services)
    assert winner.start(allow, deadline=time.time() + 30, key="raced")
    rt._follower.follow(winner)
    assert [r.status for r in BatchHandle(winner).results(10)] == [Status.ok]
    written, sent = _rows(rt, batch.id), len(rt._transport.taken)
    deny = rt.policies.policy_for(Path(batch.workspace), {"deny": ["bump"]})
    assert (
        BatchRun(batch, rt._services).start(deny, deadline=time.time() + 30, key="raced") is False
    )
    assert _rows(rt, batch.id) == written
    assert len(rt._transport.taken) == sent
    assert rt.ledger.ends(batch.id)["w"].status is Status.ok
    assert labels(workspace) == ["w"]
