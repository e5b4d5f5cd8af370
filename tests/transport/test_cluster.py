"""A submit's first reads on the Celery transport (runtime/transport/cluster.py):
marks, the plan's copy, the record and the task messages in one round trip
where the broker is the state's Redis (a big stage's messages in rounds).
Real redis-server; the message is read back from the broker's list as a
worker's kombu would."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import redis

from runtime.errors import StateUnavailable
from runtime.keyspace.names import READS, TASK
from runtime.settings import Settings
from runtime.stack.processes import stop_process
from runtime.stack.redis_server import redis_needles, start_redis
from runtime.transport import cluster, outbox
from runtime.transport.app import make_app
from runtime.transport.cluster import CeleryTransport
from runtime.types import CallMessage
from tests.support.messages import message
from tests.support.round_trips import Counting

pytestmark = pytest.mark.server


@pytest.fixture
def transport(tmp_path):
    settings = Settings(home=tmp_path)
    url, pid = start_redis(settings)
    pool = redis.ConnectionPool.from_url(url, connection_class=Counting)
    found = CeleryTransport(make_app(settings, redis_url=url), redis.Redis(connection_pool=pool))
    try:
        yield found
    finally:
        found.close()
        stop_process(pid, needles=redis_needles(url))


def reads(transport: CeleryTransport) -> list[dict]:
    """The task messages waiting in the reads queue, oldest first, as kombu's
    Redis transport stores them (JSON, the body in base64)."""
    client = redis.Redis(connection_pool=transport.client.connection_pool)
    found = [json.loads(raw) for raw in reversed(client.lrange(READS, 0, -1))]
    return [{**m, "body": json.loads(base64.b64decode(m["body"]))} for m in found]


def test_a_submits_reads_go_with_their_marks_in_one_round_trip(transport):
    assert transport.queue.rides  # one Redis is broker and state, by default
    signed = [message(c, "nap", {"label": c}, workspace=Path(".")) for c in ("c1", "c2")]
    calls = [CallMessage.from_wire(s) for s in signed]
    transport.post([calls[0]], parallel=True)  # kombu declares its queue once: not counted
    redis.Redis(connection_pool=transport.client.connection_pool).delete(READS)
    transport.drop_record("earlier", later=True)  # a record written before rides too
    before = Counting.sends
    transport.post_marked("b1", calls, plan={"batch": {"id": "b1"}}, record="{}")
    assert Counting.sends - before == 1
    assert set(transport.sent("b1")) == {"c1", "c2"}
    assert transport.plan("b1") == {"batch": {"id": "b1"}}
    assert set(transport.kept_records()) == {"b1"}
    sent = reads(transport)
    assert [m["headers"]["task"] for m in sent] == [TASK, TASK]
    assert [m["body"][0][0]["call_id"] for m in sent] == ["c1", "c2"]
    assert sent[0]["body"][0][0]["signature"] == signed[0]["signature"]
    assert sent[0]["properties"]["delivery_info"]["routing_key"] == READS


def test_a_broker_apart_from_the_state_takes_the_messages_on_its_own(transport):
    transport.queue.rides = False  # as with TOOLRUN_BROKER_URL naming another broker
    call = CallMessage.from_wire(message("c1", "nap", {"label": "c1"}, workspace=Path(".")))
    transport.post_marked("b2", [call], plan={"batch": {"id": "b2"}})
    assert [m["body"][0][0]["call_id"] for m in reads(transport)] == ["c1"]
    assert set(transport.sent("b2")) == {"c1"}


def test_a_message_riding_the_round_trip_is_the_one_celery_sends(transport):
    """The ride leaves out kombu's retry and queue declaring, not a byte of
    Celery's message: ids and posting times aside, it equals the one the
    producer sends; first, on a Redis no one declared the queue in."""
    call = CallMessage.from_wire(message("c1", "nap", {"label": "c1"}, workspace=Path(".")))
    transport.post_marked("b3", [call], plan={"batch": {"id": "b3"}})
    transport.post([call], parallel=True)
    rode, posted = reads(transport)
    for sent in (rode, posted):
        sent["body"][0][0].pop("sent_at")
        for key in ("id", "root_id"):
            sent["headers"].pop(key)
        for key in ("delivery_tag", "correlation_id"):
            sent["properties"].pop(key)
    assert rode == posted


def calls_of(count: int) -> list[CallMessage]:
    return [
        CallMessage.from_wire(message(f"c{i}", "nap", {"label": f"c{i}"}, workspace=Path(".")))
        for i in range(count)
    ]


def declared(transport: CeleryTransport, call: CallMessage) -> None:
    """kombu declares its queue on a process's first post: not counted."""
    transport.post([call], parallel=True)
    redis.Redis(connection_pool=transport.client.connection_pool).delete(READS)


def test_a_stage_bigger_than_a_round_goes_in_rounds(transport, monkeypatch):
    monkeypatch.setattr(cluster, "ROUND_MESSAGES", 3)
    calls = calls_of(7)
    declared(transport, calls[0])
    before = Counting.sends
    transport.post_marked("b4", calls, plan={"batch": {"id": "b4"}}, record="{}")
    assert Counting.sends - before == 3  # 3, 3 and 1 messages
    assert [m["body"][0][0]["call_id"] for m in reads(transport)] == [c.call_id for c in calls]
    assert set(transport.sent("b4")) == {c.call_id for c in calls}
    assert set(transport.kept_records()) == {"b4"}


def test_marks_and_record_land_with_the_first_round(transport, monkeypatch):
    """Redis lost after the first round: what was not sent is marked sent and
    its batch's record kept, for the sweep to send again."""
    monkeypatch.setattr(cluster, "ROUND_MESSAGES", 3)
    calls = calls_of(7)
    declared(transport, calls[0])
    execute, rounds = redis.client.Pipeline.execute, []

    def lost_after_one(pipe, *args, **kwargs):
        rounds.append(len(pipe.command_stack))
        if len(rounds) > 1:
            raise redis.ConnectionError("Redis went away")
        return execute(pipe, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, "execute", lost_after_one)
    with pytest.raises(StateUnavailable):
        transport.post_marked("b5", calls, plan={"batch": {"id": "b5"}}, record="{}")
    assert [m["body"][0][0]["call_id"] for m in reads(transport)] == ["c0", "c1", "c2"]
    assert set(transport.sent("b5")) == {c.call_id for c in calls}
    assert transport.plan("b5") == {"batch": {"id": "b5"}}
    assert set(transport.kept_records()) == {"b5"}


def test_a_small_stage_is_one_round_trip(transport):
    calls = calls_of(outbox.ROUND_MESSAGES)
    declared(transport, calls[0])
    before = Counting.sends
    transport.post_marked("b6", calls, plan={"batch": {"id": "b6"}}, record="{}")
    assert Counting.sends - before == 1
    assert len(reads(transport)) == outbox.ROUND_MESSAGES


def test_a_posted_stage_goes_in_rounds_after_its_first_message(transport, monkeypatch):
    """kombu's producer batch, on the broker's own connections: its
    pipelines are counted."""
    monkeypatch.setattr(outbox, "ROUND_MESSAGES", 3)
    calls = calls_of(7)
    declared(transport, calls[0])
    execute, rounds = redis.client.Pipeline.execute, []

    def counted(pipe, *args, **kwargs):
        rounds.append(sum(name == "LPUSH" for (name, *_), _ in pipe.command_stack))
        return execute(pipe, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, "execute", counted)
    assert transport.post(calls, parallel=True)
    assert rounds == [1, 3, 3]  # the first alone, for a worker to start on
    assert [m["body"][0][0]["call_id"] for m in reads(transport)] == [c.call_id for c in calls]
