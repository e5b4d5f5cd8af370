"""Leases on real workers: a claimed call is held by a live worker that renews
its lease from its main process, so a second delivery never ends a call that
still runs, a dead worker's call ends within seconds (not at the deadline or
the broker's visibility timeout), and a dead sweep holder is replaced within
seconds (docs/architecture.md, "Leases").

The stack runs the production visibility timeout (an hour: a lost worker's
message does not come back during the test), two effects slots, a 3-second
lease and a 1-second resend, so a queue backed up for a few seconds gets its
calls sent again."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter

import pytest
import redis

from runtime import sessions
from runtime.keyspace.names import EFFECTS, LEASES, SWEEP_LOCK, lease_member, results_key, sent_key
from runtime.stack.embedded import stop_worker
from runtime.types import Status
from tests.support import clock_skew
from tests.support.dead_pool import dead_pool
from tests.support.faults import FaultStack
from tests.support.tools import marks, release
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]
ALLOW = {"allow": ["bump", "held_write", "held"]}
LEASE = 3.0  # renewed every 0.75 s: a busy machine may delay a renewal, not two


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory, user_settings):
    home = tmp_path_factory.mktemp("leases")
    with FaultStack(
        home,
        user_settings=user_settings,
        visibility_timeout=3600,
        effects_concurrency=2,
        lease_seconds=LEASE,
        resend_after=1.0,
    ) as stack:
        with stack.client() as runtime:
            yield stack, runtime


@pytest.fixture
def leased(module_stack):
    """The module's stack with one live worker per queue (a test may have killed some)."""
    stack, runtime = module_stack
    for queue in ("reads", "effects"):
        if not stack.workers(queue):
            stack.add_worker(queue)
    return stack, runtime, redis.Redis.from_url(stack.redis_url)


def held(workspace, label: str) -> list[dict]:
    return [m for m in marks(workspace, "held") if m["label"] == label]


def test_a_resent_copy_never_ends_a_call_another_slot_still_runs(leased, workspace, request):
    stack, runtime, state = leased
    for label in ("a", "b", "x"):
        request.addfinalizer(lambda label=label: release(workspace, label))
    submit = {"mode": "auto", "workspace": workspace, "rules": ALLOW, "timeout": 90}
    blockers = [runtime.submit([call(c, "held_write", label=c)], **submit) for c in ("a", "b")]
    wait_for(lambda: held(workspace, "a") and held(workspace, "b"), what="both slots busy")
    handle = runtime.submit(
        [call("x", "held_write", label="x"), call("y", "bump", label="y")], **submit
    )
    first = wait_for(lambda: state.hget(sent_key(handle.batch_id), "x"), what="x sent")
    # The queue is backed up past the resend: x goes again, so two copies wait.
    wait_for(lambda: state.hget(sent_key(handle.batch_id), "x") != first, what="x sent again")
    release(workspace, "a")
    release(workspace, "b")
    wait_for(lambda: held(workspace, "x"), what="x running")
    # Both copies reached the two slots: one runs x, the other finds it claimed.
    wait_for(lambda: state.llen(EFFECTS) == 0 and state.hlen("unacked") == 1, what="copies taken")
    time.sleep(LEASE)  # x's lease is renewed past its first term while it runs
    assert [m["label"] for m in marks(workspace, "effects")].count("y") == 0
    released = time.time()
    release(workspace, "x")

    results = {r.call_id: r for r in handle.results(timeout=60)}
    assert results["x"].status is Status.ok, results["x"].model_message
    assert results["y"].status is Status.ok, results["y"].model_message
    effects = marks(workspace, "effects")
    assert Counter(m["label"] for m in effects) == {"a": 1, "b": 1, "x": 1, "y": 1}
    assert [m["at"] for m in effects if m["label"] == "y"][0] >= released
    ends = runtime.ledger.events(handle.batch_id, "x")
    assert [e.kind for e in ends].count("finished") == 1
    for blocker in blockers:
        assert [r.status for r in blocker.results(timeout=30)] == [Status.ok]


def test_a_dead_workers_claimed_call_ends_within_seconds_not_at_the_deadline(leased, workspace):
    stack, runtime, _ = leased
    batch = [call("w", "held_write", label="dead"), call("after", "bump", label="after")]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=300
    )
    wait_for(lambda: held(workspace, "dead"), what="w running")
    [victim] = stack.workers("effects")
    stack.kill_worker(victim)
    stack.add_worker("effects")
    killed = time.monotonic()

    # The visibility timeout is an hour and the deadline five minutes: only the
    # lapsed lease can end w this soon.
    results = {r.call_id: r for r in handle.results(timeout=45)}
    assert time.monotonic() - killed < 45
    assert results["w"].status is Status.outcome_unknown, results["w"].model_message
    assert "worker running this call was lost" in results["w"].model_message
    assert results["after"].status is Status.ok
    assert Counter(m["label"] for m in marks(workspace, "effects")) == {"dead": 1, "after": 1}


def test_a_dead_reads_workers_reads_run_again_within_seconds(leased, workspace, request):
    stack, runtime, _ = leased
    request.addfinalizer(lambda: release(workspace, "reads"))
    batch = [call(f"r{i}", "held", label="reads") for i in range(3)]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=300)
    wait_for(lambda: len(held(workspace, "reads")) == 3, what="3 reads running")
    [victim] = stack.workers("reads")
    stack.kill_worker(victim)
    replacement = stack.add_worker("reads")
    # An hour's visibility timeout: only the lapsed leases send them again.
    wait_for(lambda: len(held(workspace, "reads")) == 6, what="the reads running again")
    release(workspace, "reads")

    results = handle.results(timeout=30)
    assert [r.status for r in results] == [Status.ok] * 3, [r.model_message for r in results]
    assert {r.worker for r in results} == {replacement["name"]}
    assert all(r.attempts == 2 for r in results)


def test_a_dead_sweep_holder_is_replaced_within_seconds(leased):
    stack, _, state = leased
    holder = wait_for(lambda: state.get(SWEEP_LOCK), what="a sweep holder").decode()
    _, pid, _ = holder.split(":")
    [victim] = [w for w in stack.record.workers if w["pid"] == int(pid)]
    stack.kill_worker(victim)
    stack.add_worker(victim["queue"])
    killed = time.monotonic()
    taken = wait_for(lambda: (h := state.get(SWEEP_LOCK)) and h.decode() != holder and h)
    assert time.monotonic() - killed < 4 * LEASE + 10
    live = {w["pid"] for w in stack.record.workers if w["pid"] != victim["pid"]}
    assert int(taken.decode().split(":")[1]) in live


def test_a_warm_shutdown_hands_the_sweep_on_at_once(leased):
    """A worker stopped with SIGTERM gives its sweep lease up as it leaves: the
    lease no longer names it once it has exited (not after the lease lapses),
    and another worker takes the sweep."""
    stack, _, state = leased
    holder = wait_for(lambda: state.get(SWEEP_LOCK), what="a sweep holder").decode()
    _, pid, _ = holder.split(":")
    [leaving] = [w for w in stack.record.workers if w["pid"] == int(pid)]
    assert stop_worker(leaving, graceful=True, timeout=60), f"{leaving['name']} did not stop"
    assert state.get(SWEEP_LOCK) != holder.encode()  # released, not left to lapse
    stack.add_worker(leaving["queue"])
    taken = wait_for(lambda: state.get(SWEEP_LOCK), what="a new sweep holder").decode()
    assert taken != holder


SKEW = 10 * LEASE  # far more than a lease, either way


def workerless_stack(tmp_path, user_settings) -> FaultStack:
    """A stack of the test's own with no worker yet: the test adds them, skewed or not."""
    return FaultStack(
        tmp_path / "home",
        user_settings=user_settings,
        visibility_timeout=3600,
        lease_seconds=LEASE,
        reads_workers=0,
        effects_workers=0,
    )


@pytest.mark.parametrize(
    ("skewed", "seconds"),
    [("effects", -SKEW), ("reads", SKEW)],
    ids=["runner-behind", "judge-ahead"],
)
def test_a_clock_skewed_by_more_than_a_lease_ends_no_live_call(
    skewed, seconds, tmp_path, user_settings, workspace, request
):
    """One worker's clock is off by ten leases: the runner's behind (its
    renewals, on its own clock, would lapse at once) or the sweeping worker's
    ahead (on its own clock, every other lease lapsed long ago). Leases are
    written and judged on Redis's clock, so the call runs to its end."""
    request.addfinalizer(lambda: release(workspace, "x"))
    with workerless_stack(tmp_path, user_settings) as stack:
        skew = {clock_skew.SKEW: str(seconds)}
        judge = stack.add_worker("reads", env=skew if skewed == "reads" else None)
        state = redis.Redis.from_url(stack.redis_url)
        wait_for(lambda: (stack.sweep_holder() or ("", None))[1] == judge, what="the sweep held")
        stack.add_worker("effects", env=skew if skewed == "effects" else None)
        with stack.client() as runtime:
            handle = runtime.submit(
                [call("x", "held_write", label="x")],
                mode="auto",
                workspace=workspace,
                rules=ALLOW,
                timeout=90,
            )
            member = lease_member(handle.batch_id, "x")
            renewals: set[float] = set()

            def lived_or_ended() -> bool:
                if state.hexists(results_key(handle.batch_id), "x"):
                    return True
                if (score := state.zscore(LEASES, member)) is not None:
                    renewals.add(score)
                return len(renewals) > 8  # two leases' worth of renewals, sweeps between

            wait_for(lived_or_ended, timeout=60, what="x renewed past two leases", every=0.05)
            release(workspace, "x")
            [result] = handle.results(timeout=30)
        assert result.status == Status.ok, (result.status, result.model_message)
        assert stack.sweep_holder()[1] == judge, "another worker judged the leases"


def test_what_a_dead_worker_left_on_its_host_dies_without_a_worker_starting(leased, request):
    """A worker killed whole (main and pool processes) leaves an unconfined
    command running; no judge may run on its host and no replacement may
    start there. Every live worker on the host looks for such orphans on
    each heartbeat and kills them, so they die within a heartbeat, before
    the dead worker's lease could be judged lost (docs/architecture.md,
    "Leases")."""
    stack, _, _ = leased
    _, orphan = dead_pool(stack.settings.home / "sessions")  # another worker's, on this host

    def kill() -> None:
        with contextlib.suppress(OSError):
            os.kill(orphan, signal.SIGKILL)

    request.addfinalizer(kill)

    def gone() -> bool:
        fields = sessions._stat(str(orphan))
        return fields is None or fields[0] in "ZX"

    wait_for(gone, timeout=LEASE * 4, what="the orphan killed by a live worker's heartbeat")


def test_a_sweeping_worker_whose_clock_runs_ahead_ends_no_batch_before_its_deadline(
    tmp_path, user_settings, workspace, request
):
    """The sweep holder's clock is a minute ahead of the submitter's; a batch
    given 30 s is judged against a deadline on Redis's clock, as leases are,
    so the sweep does not end it at once as past its deadline."""
    request.addfinalizer(lambda: release(workspace, "x"))
    with workerless_stack(tmp_path, user_settings) as stack:
        judge = stack.add_worker("reads", env={clock_skew.SKEW: "60"})
        wait_for(lambda: (stack.sweep_holder() or ("", None))[1] == judge, what="the sweep held")
        stack.add_worker("effects")
        with stack.client() as runtime:
            handle = runtime.submit(
                [call("x", "held_write", label="x")],
                mode="auto",
                workspace=workspace,
                rules=ALLOW,
                timeout=30,
            )
            wait_for(lambda: held(workspace, "x"), timeout=20, what="x under way")
            time.sleep(LEASE)  # sweeps, each a judgement of the deadline
            release(workspace, "x")
            [result] = handle.results(timeout=30)
        assert result.status == Status.ok, (result.status, result.model_message)
