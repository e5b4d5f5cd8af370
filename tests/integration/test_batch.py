"""A model batch end to end: real Redis, real reads and effects workers."""

import asyncio
from collections import Counter

import pytest

from runtime.transport.outbox import ROUND_MESSAGES, CeleryQueue
from runtime.types import Status
from tests.support.tools import held_running, marks, release

# Auto mode runs side effects only where a rule allows them.
WRITES = {"allow": ["bump", "explode", "write_file", "edit_file"]}


def call(call_id, name, **arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


def test_reads_between_writes_run_together_and_a_read_after_a_write_sees_it(
    runtime, workspace, request
):
    """The reads of a stage are held until both have started: they can only
    end if they ran side by side."""
    request.addfinalizer(lambda: [release(workspace, label) for label in ("ab", "cd")])
    batch = [
        call("r1", "held", label="ab"),
        call("r2", "held", label="ab"),
        call("w1", "write_file", path="notes.txt", content="fresh"),
        call("r3", "read_file", path="notes.txt"),
        call("r4", "held", label="cd"),
        call("r5", "held", label="cd"),
        call("w2", "bump", label="after"),
    ]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    held_running(workspace, 2)
    assert marks(workspace, "effects") == [] and not (workspace / "notes.txt").exists()
    release(workspace, "ab")
    held_running(workspace, 4)
    release(workspace, "cd")
    results = handle.results(timeout=60)
    assert [r.call_id for r in results] == ["r1", "r2", "w1", "r3", "r4", "r5", "w2"]
    assert all(r.status is Status.ok for r in results), [r.model_message for r in results]
    assert "fresh" in results[3].content["text"]
    bumped = marks(workspace, "effects")[0]["at"]
    assert all(m["at"] <= bumped for m in marks(workspace, "released"))
    assert results[0].worker and results[2].worker and results[0].worker != results[2].worker


def test_every_early_end_gets_exactly_one_result_in_order(runtime, workspace):
    batch = [
        call("a", "nope_tool", x=1),
        call("b", "bump", label=None),
        call("c", "obliterate", label="x"),
        call("d", "stall", label="s", seconds=5),
        call("e", "nap", label="ok"),
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, on_error="continue", rules=WRITES
    )
    streamed = list(handle.stream(timeout=60))
    assert sorted(r.call_id for r in streamed) == list("abcde")
    statuses = [r.status for r in handle.results()]
    assert statuses == [
        Status.unknown_tool,
        Status.invalid_arguments,
        Status.denied,
        Status.timeout,
        Status.ok,
    ]
    assert "Available tools" in handle.results()[0].model_message
    assert "label: must be a string (got null)" in handle.results()[1].model_message
    assert marks(workspace, "effects") == []


def test_plan_mode_disables_side_effects_and_runs_nothing(runtime, workspace):
    batch = [call("w", "bump", label="x"), call("r", "nap", label="ok")]
    results = runtime.submit(batch, mode="plan", workspace=workspace).results(timeout=60)
    assert [r.status for r in results] == [Status.disabled, Status.ok]
    assert "disabled in plan mode" in results[0].model_message
    assert marks(workspace, "effects") == []


def test_a_failed_step_skips_later_side_effects_but_reads_still_run(runtime, workspace):
    batch = [
        call("w1", "explode", message="no space left"),
        call("r1", "nap", label="still"),
        call("w2", "bump", label="never"),
        call("w3", "write_file", path="x.txt", content="never"),
    ]
    results = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES).results(
        timeout=60
    )
    assert [r.status for r in results] == [Status.error, Status.ok, Status.skipped, Status.skipped]
    assert results[0].error.kind == "ValueError" and "no space left" in results[0].model_message
    assert "w1" in results[2].model_message
    assert [m["label"] for m in marks(workspace, "effects")] == ["explode"]
    assert not (workspace / "x.txt").exists()


def test_on_error_continue_runs_every_step(runtime, workspace):
    batch = [call("w1", "explode"), call("w2", "bump", label="runs")]
    results = runtime.submit(
        batch, mode="auto", workspace=workspace, on_error="continue", rules=WRITES
    ).results(timeout=60)
    assert [r.status for r in results] == [Status.error, Status.ok]


def test_results_stream_as_they_finish(runtime, workspace, request):
    request.addfinalizer(lambda: release(workspace, "slow"))
    batch = [call("slow", "held", label="slow"), call("fast", "nap", label="fast")]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    stream = handle.stream(timeout=60)
    first = next(stream)  # `slow` runs until released
    assert first.call_id == "fast"
    release(workspace, "slow")
    assert [r.call_id for r in stream] == ["slow"]


def test_asyncio_orchestrators_iterate_results(runtime, workspace):
    async def main():
        handles = [
            await runtime.asubmit(
                [call(f"n{i}", "nap", label=f"x{i}")], mode="auto", workspace=workspace
            )
            for i in range(5)
        ]
        return [[r async for r in handle] for handle in handles]

    outcome = asyncio.run(main())
    assert [[r.call_id for r in rs] for rs in outcome] == [[f"n{i}"] for i in range(5)]


def test_the_ledger_holds_a_decision_and_a_finished_row_for_each_call_that_ran(runtime, workspace):
    batch = [call("r", "nap", label="l"), call("w", "bump", label="l"), call("u", "ghost")]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    handle.results(timeout=60)
    events = runtime.ledger.events(handle.batch_id)
    kinds = {(e.call_id, e.kind) for e in events}
    for call_id in ("r", "w"):
        assert {(call_id, "decision"), (call_id, "started"), (call_id, "finished")} <= kinds
    assert ("u", "lookup_failed") in kinds
    decision = next(e for e in events if e.call_id == "w" and e.kind == "decision")
    assert (decision.effect, decision.mode, decision.rule) == ("allow", "auto", "bump")
    assert decision.source == "submit" and decision.risk == "write" and decision.policy_version
    assert [c.status for c in runtime.ledger.calls(handle.batch_id)] == [
        "ok",
        "ok",
        "unknown_tool",
    ]


def test_a_batch_deadline_ends_every_open_call(runtime, workspace, request):
    request.addfinalizer(lambda: release(workspace, "slow"))  # runs past the deadline
    batch = [call("slow", "held", label="slow"), call("w", "bump", label="later")]
    results = runtime.submit(
        batch, mode="auto", workspace=workspace, timeout=0.5, rules=WRITES
    ).results()
    assert [r.status for r in results] == [Status.timeout, Status.skipped]


@pytest.mark.parametrize("mode", ["auto", "accept_edits"])
def test_a_path_outside_the_workspace_is_refused_before_anything_runs(runtime, workspace, mode):
    outside = workspace.parent / "outside.txt"
    batch = [call("w", "write_file", path="../outside.txt", content="x")]
    handle = runtime.submit(batch, mode=mode, workspace=workspace, rules=WRITES)
    [result] = handle.results(timeout=60)
    assert result.status is Status.denied and "outside the workspace" in result.model_message
    assert not outside.exists()


def test_a_stage_bigger_than_a_round_is_sent_in_rounds_and_each_read_runs_once(
    runtime, workspace, monkeypatch
):
    rounds = []
    ride = CeleryQueue.ride

    def counted(queue, pipe, messages):
        rounds.append(len(messages))
        return ride(queue, pipe, messages)

    monkeypatch.setattr(CeleryQueue, "ride", counted)
    ids = [f"r{i}" for i in range(2 * ROUND_MESSAGES + 5)]
    handle = runtime.submit(
        [call(c, "nap", label=c) for c in ids], mode="auto", workspace=workspace
    )
    results = handle.results(timeout=120)
    assert rounds == [ROUND_MESSAGES, ROUND_MESSAGES, 5]
    assert [r.call_id for r in results] == ids
    assert all(r.status is Status.ok for r in results), [r.model_message for r in results]
    assert Counter(m["call_id"] for m in marks(workspace, "intervals")) == dict.fromkeys(ids, 1)
    assert set(runtime.ledger.ends(handle.batch_id)) == set(ids)
