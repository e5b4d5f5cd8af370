"""The `Worker` on the in-memory transport, directly: the time limit of a
chain's task is the sum of its steps' (a backstop: each step has its own,
`workers/request.py`), and each step's is its tool's; and what `finish` does
after a call's end, branch by branch: an end this delivery did not make is not
published, one it may have made is published only if it was staked first, a
closed batch's end drops the plan's copy and counts no stage, and a stage's
last end moves the batch on, or closes it after its last stage unless its
record has not landed yet."""

from __future__ import annotations

import pytest

from runtime.batch.plan import BatchPlan
from runtime.execution import executor
from runtime.results import formatter
from runtime.transport import chain
from runtime.types import Batch, CallMessage, Mode, ToolCall, ToolResult
from tests.support.in_memory import in_memory
from tests.support.messages import message, policy, signed_plan
from tests.support.waiting import wait_for


@pytest.fixture
def transport(tmp_path):
    with in_memory(tmp_path, sweep=False, default_timeout=10, kill_grace=2) as transport:
        yield transport


@pytest.fixture
def worker(transport):
    return transport.worker


def recorded(worker, workspace, *call_ids: str, tool: str = "bump") -> BatchPlan:
    """A batch of `tool`'s calls recorded with its plan, as a submitter records
    it (`bump`s are writes: a stage each, in order; `nap`s are reads: one
    stage), with nothing sent yet."""
    batch = Batch(
        calls=[ToolCall(id=c, name=tool, arguments={"label": c}) for c in call_ids],
        mode=Mode.auto,
        workspace=str(workspace),
    )
    plan = signed_plan(worker.registry, batch, policy(workspace, allow=["bump"]))
    assert worker.ledger.record_batch(batch, plan=plan.model_dump(mode="json"))  # new
    return plan


def executed(worker, plan: BatchPlan, call_id: str) -> tuple[CallMessage, executor.Outcome]:
    """A planned call's message run by the executor, as `Worker.run` runs it
    before `finish`: checked, claimed, run, its end written to the ledger."""
    message = plan.calls[call_id].message
    outcome = executor.execute(
        message,
        registry=worker.registry,
        ledger=worker.ledger,
        settings=worker.settings,
        key=worker.key,
        worker=worker.name,
        state=worker.state,
    )
    assert outcome.result.ok, outcome.result.model_message
    return message, outcome


def end(message: CallMessage, text: str) -> ToolResult:
    return formatter.success(message.call_id, message.tool, text, max_bytes=1024)


def test_a_chains_task_may_run_its_steps_limits_and_each_step_has_its_own(worker, tmp_path):
    steps = [
        CallMessage.from_wire(message(call_id, tool, {"label": call_id}, workspace=tmp_path))
        for call_id, tool in (("a", "bump"), ("h", "held_write"), ("b", "bump"))
    ]
    raw = chain.link(steps).wire()
    assert worker.hard_limit(raw) == (10 + 2) + (60 + 2) + (10 + 2)  # held_write: timeout=60
    assert worker.hard_limit(raw, alone=True) == 12
    assert worker.hard_limit(chain.step_of(raw, 1), alone=True) == 62
    assert worker.hard_limit(steps[0].wire()) == 12
    assert worker.hard_limit({"tool": 3}) == 12  # malformed: the default timeout's limit


def test_a_stages_last_end_is_published_and_the_next_stage_sent(worker, transport, tmp_path):
    plan = recorded(worker, tmp_path, "w1", "w2")
    message, outcome = executed(worker, plan, "w1")
    assert (message.stage, message.last_stage, outcome.ended) == (0, False, True)
    worker.finish(message, outcome.result, outcome.ended)
    assert transport.recall(plan.batch.id, "w1") == outcome.result
    wait_for(lambda: [m.call_id for m in transport.taken] == ["w2"], what="w2 sent")


def test_an_end_this_delivery_did_not_make_is_not_published(worker, transport, tmp_path):
    plan = recorded(worker, tmp_path, "w1", "w2")
    message, outcome = executed(worker, plan, "w1")
    worker.finish(message, outcome.result, False)  # another delivery's end stands
    assert transport.recall(plan.batch.id, "w1") is None
    assert transport.publish(plan.batch.id, outcome.result, reply_to=None, stage=0) == 1
    assert transport.taken == []  # nor did the batch move on


def test_an_end_that_may_have_ended_its_call_is_published_only_if_staked_first(
    worker, transport, tmp_path
):
    plan = recorded(worker, tmp_path, "w1", "w2")
    message = plan.calls["w1"].message
    first, late = end(message, "first"), end(message, "late")
    assert transport.stake(plan.batch.id, first)  # another delivery's, stored first
    worker.finish(message, late, None)
    assert transport.recall(plan.batch.id, "w1") == first
    assert transport.taken == []
    worker.finish(plan.calls["w2"].message, late.model_copy(update={"call_id": "w2"}), None)
    assert transport.recall(plan.batch.id, "w2").call_id == "w2"  # staked now: published


def test_a_closed_batchs_end_drops_the_plans_copy_and_counts_no_stage(worker, transport, tmp_path):
    plan = recorded(worker, tmp_path, "w1", "w2")
    transport.keep_plan(plan.batch.id, plan.model_dump(mode="json"))
    message, outcome = executed(worker, plan, "w1")
    worker.finish(message, outcome.result, True, closed=True)
    assert transport.recall(plan.batch.id, "w1") == outcome.result
    assert transport.plan(plan.batch.id) is None
    assert transport.publish(plan.batch.id, outcome.result, reply_to=None, stage=0) == 1
    assert transport.taken == []  # an ended batch is not moved on


@pytest.mark.parametrize("unrecorded", [False, True])
def test_the_last_stages_last_end_closes_the_batch_unless_its_record_has_not_landed(
    worker, transport, tmp_path, unrecorded
):
    """A last stage of two reads: the second end's own transaction does not
    close the batch (only a stage's only call does), the worker does."""
    plan = recorded(worker, tmp_path, "r1", "r2", tool="nap")
    for call_id in ("r1", "r2"):
        message, outcome = executed(worker, plan, call_id)
        assert (message.last_stage, message.stage_size, outcome.closed) == (True, 2, False)
        worker.finish(message, outcome.result, outcome.ended, unrecorded=unrecorded)
        assert transport.recall(plan.batch.id, call_id) == outcome.result
        if call_id == "r1":  # its stage goes on: nobody closes it yet
            assert worker.ledger.batch(plan.batch.id).ended_at is None
    # Not recorded yet: the record's own transaction ends it, not this worker.
    assert (worker.ledger.batch(plan.batch.id).ended_at is None) is unrecorded
