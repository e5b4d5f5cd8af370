"""Flow control as the advancer sends (runtime/batch/limits_at_send.py), on the session
stack's real Redis: what each limit lets through, ends or holds, and how fair
share parks a key's reads and hands their turns on."""

from __future__ import annotations

import dataclasses
import time
import uuid
from pathlib import Path

import pytest
import redis

from runtime.batch.limits_at_send import Flow
from runtime.batch.plan import BatchPlan
from runtime.flow.limits import Limits
from runtime.keyspace.names import HELD
from runtime.tools.loading import load_tools
from runtime.transport.redis_state import RedisState
from runtime.types import Batch, Mode, Status, ToolCall
from tests.support.messages import policy, signed_plan


class Posted:
    def __init__(self) -> None:
        self.messages: list = []

    def post(self, messages, *, parallel: bool, chained: bool = False) -> bool:
        self.messages += messages
        return True


@pytest.fixture(scope="module")
def registry():
    return load_tools(["tests.support.tools"], mcp_servers_file=None)


@pytest.fixture
def world(stack, registry):
    state = RedisState(redis.Redis.from_url(stack.redis_url))
    posted = Posted()
    yield Flow(state=state, queue=posted, registry=registry), state, posted
    state.close()


def planned(registry, workspace: Path, limits: dict, count: int = 5) -> BatchPlan:
    calls = [ToolCall(id=f"c{i}", name="nap", arguments={"label": "x"}) for i in range(count)]
    batch = Batch(calls=calls, mode=Mode.auto, workspace=str(workspace))
    snapshot = Limits.model_validate(limits).snapshot()
    base = policy(workspace)
    rules = dataclasses.replace(base, limits=snapshot).counted_for(f"k-{uuid.uuid4().hex[:8]}")
    return signed_plan(registry, batch, rules)


def ids(plan: BatchPlan) -> list[list[str]]:
    return [[c] for c in plan.stages[0].calls]


def test_without_limits_every_group_goes_and_nothing_is_asked(world, registry, tmp_path):
    flow, _, _ = world
    plan = planned(registry, tmp_path, {})
    assert flow.gate(plan, ids(plan), conclude=None) == (ids(plan), False)


def test_refuse_ends_the_calls_past_the_rate(world, registry, tmp_path):
    flow, state, _ = world
    rate = {"name": "two", "per": "key", "limit": "2/minute", "on_limit": "refuse"}
    plan = planned(registry, tmp_path, {"rates": [rate]})
    ended = []
    going, any_ended = flow.gate(plan, ids(plan), lambda p, end, d: ended.append((end, d)) or True)
    assert going == [["c0"], ["c1"]] and any_ended
    assert set(state.sent(plan.batch.id)) == {"c0", "c1"}  # an ended call is not left marked
    assert [e.result.status for e, _ in ended] == [Status.rate_limited] * 3
    assert {d.rule for _, d in ended} == {"rate:two"}


def test_delay_holds_the_batch_for_the_sweep(world, registry, tmp_path):
    flow, state, _ = world
    cap = {"name": "one", "per": "key", "max": 1}
    plan = planned(registry, tmp_path, {"caps": [cap]})
    before = time.time()
    going, ended = flow.gate(plan, ids(plan), conclude=None)
    assert going == [["c0"]] and not ended
    assert set(state.sent(plan.batch.id)) == {"c0"}  # the held ones are unsent, for the sweep
    due = state.client.zscore(HELD, plan.batch.id)  # the stack's sweep takes it when due
    # Due soon after the gate held it (on a busy machine, maybe already past).
    assert due is None or before < due <= time.time() + 1.0


def test_fair_share_parks_a_key_s_reads_and_its_ends_send_the_next(world, registry, tmp_path):
    flow, state, posted = world
    plan = planned(registry, tmp_path, {"fair_share": {"in_flight_per_key": 2}})
    going, _ = flow.gate(plan, ids(plan), conclude=None)
    assert going == [["c0"], ["c1"]]
    assert flow.gate(plan, ids(plan)[2:], conclude=None)[0] == []  # parked once, not again
    flow.finished(plan.calls["c0"].message)
    assert [m.call_id for m in posted.messages] == ["c2"]
    assert "c2" in state.sent(plan.batch.id)


def test_a_read_held_at_a_rate_gives_its_fair_share_place_back(world, registry, tmp_path):
    """The sender asks the fair share before it knows the rates (one round
    trip): a read it then holds does not keep a place in flight."""
    flow, state, _ = world
    rate = {"name": "one", "per": "key", "limit": "1/minute"}
    limits = {"rates": [rate], "fair_share": {"in_flight_per_key": 2}}
    plan = planned(registry, tmp_path, limits, count=3)
    going, ended = flow.gate(plan, ids(plan), conclude=None)
    assert going == [["c0"]] and not ended
    sender = Limits.from_snapshot(plan.policy["limits"]).sender
    assert state.throttle.shares()[sender] == (1, 0)


@pytest.mark.parametrize("limits", [{}, {"caps": [{"name": "one", "per": "key", "max": 1}]}])
def test_the_plan_s_copy_is_kept_before_any_end_with_or_without_a_look(
    world, registry, tmp_path, limits
):
    """The submit's copy of the plan rides the look at the limits (one round
    trip); without limits to look at it is kept all the same."""
    flow, state, _ = world
    plan = planned(registry, tmp_path, limits)
    copy = {"plan": plan.batch.id}
    flow.gate(plan, ids(plan), conclude=None, copy=copy)
    assert state.plan(plan.batch.id) == copy


def test_a_parked_parcel_that_is_no_call_message_does_not_stop_the_sweep(world):
    """The sweep's pass over parked reads skips what it cannot read: held
    batches are still carried on (a broken parcel once stopped every pass)."""
    flow, state, _ = world
    who, batch = f"k-{uuid.uuid4().hex[:8]}", f"held-{uuid.uuid4().hex[:8]}"
    parked = [("c0", "{}"), ("c1", '{"member": "b c1"}')]
    assert state.throttle.admit_reads(who, 1, "b", parked) == [True, False]
    state.throttle.hold_batch(batch, time.time() - 1)
    assert batch in flow.due()
    assert len(state.throttle.next_reads(who, 9)) == 1
