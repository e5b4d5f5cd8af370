"""Redis restarted in the middle of a batch. With its append-only file on (as
in production) the queued messages and the results survive and the batch
completes; with it off they are gone, and the sweep sends again what no worker
took (docs/architecture.md, "A batch the cluster owns"): the batch completes
too, within seconds of Redis coming back. Either way the client never hangs,
and workers and client reconnect by themselves: the next batch runs."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from runtime.settings import Settings
from runtime.stack.processes import wait_for_workers
from runtime.transport.app import make_app
from runtime.types import Status
from tests.support.faults import FaultStack
from tests.support.tools import marks
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]
ALLOW = {"allow": ["bump", "slow_bump"]}
DEADLINE = {True: 20.0, False: 20.0}  # by persistence


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def batch() -> list[dict]:
    """Eight reads for four reads slots (four wait in Redis), then ordered steps."""
    return [
        *[call(f"r{i}", "nap", label=f"n{i}", seconds=1.0) for i in range(8)],
        call("w1", "slow_bump", label="w1", seconds=0.5),
        *[call(f"s{i}", "nap", label=f"s{i}", seconds=0.3) for i in range(4)],
        call("w2", "bump", label="w2"),
    ]


@pytest.fixture(params=[True, False], ids=["appendonly", "no-persistence"])
def redis_stack(request, tmp_path, user_settings):
    home, appendonly = tmp_path / "home", request.param
    with FaultStack(home, user_settings=user_settings, appendonly=appendonly) as stack:
        with stack.client() as runtime:
            yield stack, runtime


def started(workspace) -> set[str]:
    """Naps that have started (a read's ledger rows land when it ends)."""
    return {m["call_id"] for m in marks(workspace, "starts")}


def test_a_redis_restart_mid_batch_loses_no_result_and_the_next_batch_runs(redis_stack, workspace):
    stack, runtime = redis_stack
    deadline, calls = DEADLINE[stack.appendonly], batch()
    began = time.monotonic()
    handle = runtime.submit(
        calls, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=deadline
    )
    wait_for(lambda: len(started(workspace)) >= 2, 20, "start of the batch's first two calls")
    stack.restart_redis(down=1.0)

    results = handle.results(timeout=deadline + 10)
    took = time.monotonic() - began
    assert [r.call_id for r in results] == [c["id"] for c in calls]
    assert took < deadline + 5, f"the batch took {took:.1f} s"
    effects = Counter(m["label"] for m in marks(workspace, "effects"))
    assert all(count == 1 for count in effects.values()), effects
    assert all(r.ok for r in results), [
        (r.call_id, r.status, r.model_message) for r in results if not r.ok
    ]
    assert effects == {"w1": 1, "w2": 1}

    after = runtime.submit(
        [call("a", "nap", label="again"), call("b", "bump", label="again")],
        mode="auto",
        workspace=workspace,
        rules=ALLOW,
        timeout=30,
    )
    assert [r.status for r in after.results(timeout=35)] == [Status.ok, Status.ok]


def test_redis_killed_under_a_long_side_effect_leaves_its_worker_and_call_alive(
    tmp_path, user_settings, workspace
):
    """Production's settings (append-only, the default visibility timeout and
    lease, the stack's supervisor): Redis SIGKILLed a few seconds into a 20 s
    side effect and started again 1.5 s later. The effects worker's broker
    channel closes under it; its recovery must not take the worker down (the
    supervisor would then replace it and kill the call with it)."""
    defaults = Settings.model_fields
    with FaultStack(
        tmp_path / "home",
        user_settings=user_settings,
        appendonly=True,
        supervise=True,
        visibility_timeout=defaults["visibility_timeout"].default,
        ledger_retry_seconds=defaults["ledger_retry_seconds"].default,
        kill_grace=defaults["kill_grace"].default,
    ) as stack:
        [effects] = stack.workers("effects")
        with stack.client() as runtime:
            handle = runtime.submit(
                [call("long", "slow_bump", label="long", seconds=20.0)],
                mode="auto",
                workspace=workspace,
                rules=ALLOW,
                timeout=120,
            )
            wait_for(lambda: marks(workspace, "effects"), timeout=30, what="the side effect began")
            time.sleep(3.0)  # a few seconds into it, as the fault was seen
            stack.restart_redis(down=1.5, crash=True)

            [result] = handle.results(timeout=90)
            assert result.status == Status.ok, (result.status, result.model_message)
            assert [m["label"] for m in marks(workspace, "effects_done")] == ["long"]
            assert stack.workers("effects") == [effects], "the effects worker was replaced"
            wait_for_workers(make_app(stack.settings), [effects], timeout=30)
