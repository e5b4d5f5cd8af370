"""Redis Sentinel for toolrun's state, Celery's broker and its result store: a
primary, a replica and three sentinels of the test's own (`redis-server
--sentinel`, passwords on the master and on the sentinels). The primary is
SIGKILLed mid batch; the sentinels promote the replica, every process follows
it, and every call ends once with no side effect run twice. Skipped without
redis-server."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from pydantic import SecretStr

from runtime.types import Status
from tests.support.faults import FaultStack
from tests.support.sentinel import MASTER, SentinelGroup, available
from tests.support.tools import marks
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.faults,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not available(), reason="no redis-server: the Sentinel tests are skipped"),
]
ALLOW = {"allow": ["bump", "slow_bump"]}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def through(group: SentinelGroup, tmp_path, user_settings, **settings) -> FaultStack:
    """A stack of the test's own whose every process reaches Redis through `group`."""
    return FaultStack(
        tmp_path / "home",
        user_settings=user_settings,
        redis_url=group.url,
        redis_master_name=MASTER,
        redis_sentinel_password=SecretStr(group.sentinel_password),
        **settings,
    )


def test_a_failover_mid_batch_ends_every_call_once(tmp_path, user_settings, workspace):
    with SentinelGroup(tmp_path / "sentinel") as group:
        stack = through(group, tmp_path, user_settings, resend_after=3.0)
        with stack, stack.client() as runtime:
            # No restart policy: a worker whose broker channel closed under the
            # failover lives on (docs/architecture.md, "Brokers").
            batch = [
                *[call(f"r{i}", "nap", label=f"r{i}", seconds=0.5) for i in range(6)],
                *[call(f"s{i}", "slow_bump", label=f"s{i}", seconds=0.5) for i in range(4)],
                call("after", "nap", label="after"),
            ]
            handle = runtime.submit(
                batch,
                mode="auto",
                workspace=workspace,
                rules=ALLOW,
                on_error="continue",
                timeout=120,
            )
            give_up = time.monotonic() + 30
            while not marks(workspace, "effects"):  # the chain is under way
                assert time.monotonic() < give_up, "no effect started"
                time.sleep(0.02)
            old = group.master_port()
            group.kill_primary()
            results = {r.call_id: r for r in handle.results(timeout=120)}
            assert group.master_port() != old  # the replica was promoted
            # A step whose worker went down with the master may or may not have run,
            # and says so; every other call ran, and no effect ran twice.
            unknown = {c for c, r in results.items() if r.status is Status.outcome_unknown}
            assert unknown <= {f"s{i}" for i in range(4)}, unknown
            assert all(r.ok for c, r in results.items() if c not in unknown), [
                (r.call_id, r.model_message) for r in results.values() if not r.ok
            ]
            effects = Counter(m["label"] for m in marks(workspace, "effects"))
            assert set(effects.values()) == {1}, effects
            assert {f"s{i}" for i in range(4)} - unknown <= set(effects)
            assert results["s3"].ok and results["after"].ok  # the batch went on past it
            assert len(runtime.ledger.ends(handle.batch_id)) == len(batch)
            finished = Counter(
                e.call_id for e in runtime.ledger.events(handle.batch_id) if e.status
            )
            assert set(finished.values()) == {1}, finished


def test_a_failover_under_a_long_side_effect_leaves_its_worker_and_call_alive(
    tmp_path, user_settings, workspace
):
    """No restart policy: the master SIGKILLed a few seconds into an 8 s side
    effect; the sentinels promote the replica. The effects worker's broker
    channel closes under it; restoring and acknowledging its message then must
    not take the worker down (kombu's own Sentinel channel raised an
    AttributeError there, which Celery takes for an unrecoverable error,
    docs/architecture.md, "Brokers"), so the call ends `ok` on the same worker."""
    with SentinelGroup(tmp_path / "sentinel") as group:
        # A lease longer than a failover on a busy machine: the call's fence
        # stops a side effect that cannot confirm its lease ("Leases"), which
        # is not what this test is about.
        stack = through(group, tmp_path, user_settings, lease_seconds=30.0)
        with stack, stack.client() as runtime:
            [effects] = stack.workers("effects")
            handle = runtime.submit(
                [call("long", "slow_bump", label="long", seconds=8.0)],
                mode="auto",
                workspace=workspace,
                rules=ALLOW,
                timeout=120,
            )
            wait_for(lambda: marks(workspace, "effects"), timeout=30, what="the side effect began")
            group.kill_primary()
            [result] = handle.results(timeout=90)
            assert result.status == Status.ok, (result.status, result.model_message)
            assert [m["label"] for m in marks(workspace, "effects_done")] == ["long"]
            after = runtime.submit(
                [call("after", "bump", label="after")],
                mode="auto",
                workspace=workspace,
                rules=ALLOW,
                timeout=120,  # the cluster settles after a failover; a busy machine is slower
            )
            assert [r.status for r in after.results(timeout=125)] == [Status.ok]
            assert stack.workers("effects") == [effects], "the effects worker died"
