"""RabbitMQ as the broker, where it differs from Redis: a message delivered too
often is dead-lettered and its call still ends, with a result that says so;
and a broker outage mid batch (the connection cut by a relay the test holds,
in front of a vhost of the test's own; or a RabbitMQ node of the test's own
stopped and started again) loses nothing and runs nothing twice. Skipped
without TOOLRUN_TEST_AMQP_URL."""

from __future__ import annotations

import time
from collections import Counter
from urllib.parse import urlsplit, urlunsplit

import pytest

from runtime.types import Status
from tests.support.faults import FaultStack, Relay
from tests.support.rabbitmq import SKIP_REASON, RabbitNode, amqp_url, can_run_a_node, own_vhost
from tests.support.tools import marks

pytestmark = [
    pytest.mark.faults,
    pytest.mark.timeout(150),
    pytest.mark.skipif(amqp_url() is None, reason=SKIP_REASON),
]
ALLOW = {"allow": ["bump", "slow_bump"]}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def one_end_each(runtime, batch_id: str, count: int) -> None:
    ends = runtime.ledger.ends(batch_id)
    assert len(ends) == count
    finished = Counter(e.call_id for e in runtime.ledger.events(batch_id) if e.status)
    assert set(finished.values()) == {1}, finished


def test_a_message_rabbitmq_dead_letters_ends_its_call_with_a_result_saying_so(
    tmp_path, user_settings, workspace
):
    """toolrun's own count would give up after 10 deliveries; RabbitMQ's limit
    (1 redelivery) comes first, so the dead-letter queue is what ends the call."""
    with own_vhost(amqp_url()) as broker_url:
        stack = FaultStack(
            tmp_path / "home",
            user_settings=user_settings,
            broker_url=broker_url,
            max_deliveries=10,
            delivery_limit=1,
        )
        with stack, stack.client() as runtime:
            batch = [
                call("x", "crash_read", label="x", seconds=0.2),
                call("r", "nap", label="r"),
                call("w", "bump", label="w"),
            ]
            handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW)
            results = {r.call_id: r for r in handle.results(timeout=60)}
            assert results["x"].status is Status.error, results["x"].model_message
            assert "broker gave this call's message up" in results["x"].model_message
            assert results["x"].error.kind == "dead_letter"
            assert results["r"].ok and results["w"].ok
            runs = [m for m in marks(workspace, "runs") if m["tool"] == "crash_read"]
            assert len(runs) == 2  # the first delivery and one redelivery
            one_end_each(runtime, handle.batch_id, 3)


def through(relay: Relay, url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{relay.port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


def test_a_broker_outage_mid_batch_loses_nothing_and_runs_no_effect_twice(
    tmp_path, user_settings, workspace
):
    """The relay drops every connection to RabbitMQ and refuses new ones for a
    few seconds while reads run and an ordered chain is under way; workers and
    the client reconnect, and every call ends once."""
    with own_vhost(amqp_url()) as broker_url:
        parsed = urlsplit(broker_url)
        relay = Relay(parsed.hostname or "127.0.0.1", parsed.port or 5672)
        stack = FaultStack(
            tmp_path / "home",
            user_settings=user_settings,
            broker_url=through(relay, broker_url),
            resend_after=3.0,
        )
        try:
            with stack, stack.client() as runtime:
                batch = [
                    *[call(f"r{i}", "nap", label=f"r{i}", seconds=0.5) for i in range(6)],
                    *[call(f"s{i}", "slow_bump", label=f"s{i}", seconds=0.5) for i in range(4)],
                    call("after", "nap", label="after"),
                ]
                handle = runtime.submit(
                    batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=90
                )
                give_up = time.monotonic() + 30
                while not marks(workspace, "effects"):  # the chain is under way
                    assert time.monotonic() < give_up, "no effect started"
                    time.sleep(0.02)
                relay.cut()
                time.sleep(3.0)  # the outage itself, not a wait for a fact
                relay.restore()
                results = handle.results(timeout=90)
                assert [r.status for r in results] == [Status.ok] * len(batch), [
                    (r.call_id, r.model_message) for r in results if not r.ok
                ]
                assert Counter(m["label"] for m in marks(workspace, "effects")) == {
                    f"s{i}": 1 for i in range(4)
                }
                one_end_each(runtime, handle.batch_id, len(batch))
        finally:
            relay.close()


@pytest.mark.skipif(not can_run_a_node(), reason="rabbitmq-server cannot run a node here")
def test_a_restart_of_the_broker_mid_batch_loses_nothing_and_runs_no_effect_twice(
    tmp_path, user_settings, workspace
):
    """A RabbitMQ node of the test's own is stopped mid batch (its queued
    messages on disk) and started again on the same data: the quorum queues
    keep what was queued, workers and the client reconnect, every call ends once."""
    node = RabbitNode().start()
    try:
        stack = FaultStack(
            tmp_path / "home", user_settings=user_settings, broker_url=node.url, resend_after=3.0
        )
        with stack, stack.client() as runtime:
            batch = [
                *[call(f"r{i}", "nap", label=f"r{i}", seconds=0.5) for i in range(6)],
                *[call(f"s{i}", "slow_bump", label=f"s{i}", seconds=0.5) for i in range(4)],
                call("after", "nap", label="after"),
            ]
            handle = runtime.submit(
                batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=120
            )
            give_up = time.monotonic() + 30
            while not marks(workspace, "effects"):  # the chain is under way
                assert time.monotonic() < give_up, "no effect started"
                time.sleep(0.02)
            node.stop()
            node.start()
            results = handle.results(timeout=120)
            assert [r.status for r in results] == [Status.ok] * len(batch), [
                (r.call_id, r.model_message) for r in results if not r.ok
            ]
            assert Counter(m["label"] for m in marks(workspace, "effects")) == {
                f"s{i}": 1 for i in range(4)
            }
            one_end_each(runtime, handle.batch_id, len(batch))
    finally:
        node.remove()
