"""A batch belongs to the cluster, not to the process that sent it: its
submitter is SIGKILLed mid stage, mid chain and while an approval is pending,
and the batch still ends every call once; another process attaches and gets
every result; a key submitted again runs nothing twice; the deadline holds
with no client alive. Real Redis, real workers, real processes; each test runs
with Redis as the broker, and with RabbitMQ when TOOLRUN_TEST_AMQP_URL is set."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter

import pytest
from sqlalchemy import text

from runtime.errors import InvalidBatch
from runtime.types import Status
from tests.support.faults import FaultStack
from tests.support.rabbitmq import BROKERS, broker_for
from tests.support.submitter import spawn
from tests.support.tools import marks, release
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]
ALLOW = {"allow": ["bump", "slow_bump"]}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture(scope="module", params=BROKERS)
def owned(request, tmp_path_factory, user_settings):
    """One stack per broker for the module: the tests kill submitters, never its workers."""
    with broker_for(request.param) as broker_url:
        home = tmp_path_factory.mktemp("owned")
        with FaultStack(home, user_settings=user_settings, broker_url=broker_url) as stack:
            with stack.client() as runtime:
                yield stack, runtime


def submit_and_kill(stack: FaultStack, spec: dict, until) -> str:
    """Submit from a process of its own, SIGKILL it once `until()` holds, and
    return the batch id it printed."""
    process, batch_id = spawn(stack, spec)
    give_up = time.monotonic() + 30
    while not until(batch_id):
        assert time.monotonic() < give_up and process.poll() is None, (
            "the submitter never got there"
        )
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    return batch_id


def one_end_each(runtime, batch_id: str, count: int) -> None:
    """Exactly one end row per call, and one finishing event each."""
    ends = runtime.ledger.ends(batch_id)
    assert len(ends) == count
    finished = Counter(e.call_id for e in runtime.ledger.events(batch_id) if e.status)
    assert set(finished.values()) == {1}, finished


def test_a_submitter_killed_mid_read_stage_loses_nothing(owned, workspace):
    stack, runtime = owned
    calls = [
        *[call(f"r{i}", "nap", label=f"r{i}", seconds=0.6) for i in range(4)],
        call("w", "bump", label="w"),
        call("after", "nap", label="after"),
    ]
    spec = {
        "calls": calls,
        "mode": "auto",
        "workspace": str(workspace),
        "rules": ALLOW,
        "timeout": 60,
    }
    batch_id = submit_and_kill(stack, spec, lambda _: len(marks(workspace, "starts")) >= 1)
    results = runtime.attach(batch_id).results(timeout=30)
    assert [r.status for r in results] == [Status.ok] * 6
    assert Counter(m["label"] for m in marks(workspace, "effects")) == {"w": 1}
    one_end_each(runtime, batch_id, 6)


def test_a_submitter_killed_mid_chain_loses_nothing(owned, workspace):
    stack, runtime = owned
    calls = [call(f"s{i}", "slow_bump", label=f"s{i}", seconds=0.4) for i in range(4)]
    spec = {
        "calls": calls,
        "mode": "auto",
        "workspace": str(workspace),
        "rules": ALLOW,
        "timeout": 60,
    }
    batch_id = submit_and_kill(stack, spec, lambda _: len(marks(workspace, "effects")) >= 1)
    results = runtime.attach(batch_id).results(timeout=30)
    assert [r.status for r in results] == [Status.ok] * 4
    assert Counter(m["label"] for m in marks(workspace, "effects")) == {
        f"s{i}": 1 for i in range(4)
    }
    one_end_each(runtime, batch_id, 4)


def test_an_approval_answered_after_its_submitter_died_continues_the_batch(owned, workspace):
    stack, runtime = owned
    calls = [
        call("o", "obliterate", label="asked"),
        call("w", "bump", label="after"),
        call("r", "nap", label="read"),
    ]
    spec = {
        "calls": calls,
        "mode": "default",
        "workspace": str(workspace),
        "rules": {"allow": ["bump"]},
        "timeout": 60,
    }
    batch_id = submit_and_kill(
        stack, spec, lambda b: runtime.deployment.approvals.get(b, "o") is not None
    )
    assert marks(workspace, "effects") == []  # and the order below shows nothing ran before
    assert runtime.approve(batch_id, "o", by="alice")
    results = runtime.attach(batch_id).results(timeout=30)
    assert [r.status for r in results] == [Status.ok] * 3
    assert [m["label"] for m in marks(workspace, "effects")] == ["asked", "after"]
    one_end_each(runtime, batch_id, 3)


def test_with_no_client_alive_the_deadline_ends_every_call(owned, workspace, request):
    """The read runs until the test ends, so it is still running at the deadline
    however slow the machine; only the sweep can end the batch."""
    stack, runtime = owned
    request.addfinalizer(lambda: release(workspace, "long"))
    calls = [call("r", "held", label="long"), call("w", "bump", label="never")]
    spec = {
        "calls": calls,
        "mode": "auto",
        "workspace": str(workspace),
        "rules": ALLOW,
        "timeout": 2,
    }
    batch_id = submit_and_kill(stack, spec, lambda _: len(marks(workspace, "held")) >= 1)
    # 60 s: a bound on a broken sweep, not a measure
    wait_for(
        lambda: len(runtime.ledger.ends(batch_id)) >= 2, 60, "end of the batch at its deadline"
    )
    ends = runtime.ledger.ends(batch_id)
    assert (ends["r"].status, ends["w"].status) == (Status.timeout, Status.skipped)
    assert marks(workspace, "effects") == []
    one_end_each(runtime, batch_id, 2)


def test_the_same_key_again_attaches_and_runs_nothing_twice(owned, workspace):
    stack, runtime = owned
    calls = [
        call("w1", "slow_bump", label="a", seconds=0.5),
        call("w2", "bump", label="b"),
        call("r", "nap", label="r"),
    ]
    spec = {
        "calls": calls,
        "mode": "auto",
        "workspace": str(workspace),
        "rules": ALLOW,
        "timeout": 60,
        "key": "turn-7",
    }
    submit_and_kill(stack, spec, lambda _: len(marks(workspace, "effects")) >= 1)
    options = {k: v for k, v in spec.items() if k != "calls"}
    results = runtime.submit(calls, **options).results(timeout=30)
    assert [r.status for r in results] == [Status.ok] * 3
    assert Counter(m["label"] for m in marks(workspace, "effects")) == {"a": 1, "b": 1}
    with pytest.raises(InvalidBatch, match="other calls"):
        runtime.submit(calls[:1], **options)


@pytest.mark.parametrize("forged", ["status", "answered_by", "arguments_given", "seal"])
def test_a_tampered_approval_never_runs_with_other_arguments(owned, workspace, forged):
    stack, runtime = owned
    handle = runtime.submit(
        [call("o", "obliterate", label="asked")], mode="default", workspace=workspace, timeout=30
    )
    wait_for(
        lambda: runtime.deployment.approvals.get(handle.batch_id, "o"), what="approval request"
    )
    if forged == "status":  # approved by someone who never had the key
        _forge(
            runtime,
            handle.batch_id,
            status="approved",
            answered_by="mallory",
            arguments_given=None,
            updated_arguments=False,
            seal="0" * 64,
        )
    else:  # a genuine approval, then one of its fields changed
        assert runtime.deployment.approvals.answer(
            handle.batch_id, "o", approve=False, by="alice", reason="no"
        )
        honest = {
            "status": "approved",
            "answered_by": "alice",
            "arguments_given": json.dumps({"label": "asked"}),
            "updated_arguments": True,
        }
        from runtime.ledger.approvals import seal_of

        honest["seal"] = seal_of(
            runtime._services.key, handle.batch_id, "o", "approved", "alice", {"label": "asked"}
        )
        honest[forged] = {
            "answered_by": "mallory",
            "arguments_given": '{"label": "evil"}',
            "seal": "f" * 64,
        }[forged]
        _forge(runtime, handle.batch_id, **honest)
    runtime._services.advancer.advance(handle.batch_id)
    [result] = handle.results(timeout=20)
    assert result.status in (Status.denied,), result.model_message
    assert [m["label"] for m in marks(workspace, "effects")] == []


def _forge(runtime, batch_id: str, **columns) -> None:
    sets = ", ".join(f"{name} = :{name}" for name in columns)
    statement = text(f"UPDATE toolrun_approval SET {sets} WHERE batch_id = :b AND call_id = 'o'")
    runtime.ledger.transaction(
        lambda c: c.execute(statement, {**columns, "b": batch_id}), core=True
    )
