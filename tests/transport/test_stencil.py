"""Reads' task messages filled into Celery's own (runtime/transport/stencil.py):
the same message and the same task-sent event as Celery's, byte for byte
once decoded, ids, tags and times aside; Celery's own wherever a stencil
cannot stand for it. Real redis-server; messages read back from the
broker's list as a worker's kombu reads them, events off their channel."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
import redis
from celery import signals

from runtime.keyspace.names import READS
from runtime.settings import Settings
from runtime.stack.processes import stop_process
from runtime.stack.redis_server import redis_needles, start_redis
from runtime.transport.app import make_app
from runtime.transport.cluster import CeleryTransport
from runtime.transport.stencil import Stencils
from runtime.types import CallMessage
from tests.support.messages import message

pytestmark = pytest.mark.server
EVENTS = "/0.celeryev/task.sent"  # kombu's channel for Celery's task-sent events


@pytest.fixture
def transport(tmp_path):
    settings = Settings(home=tmp_path)
    url, pid = start_redis(settings)
    found = CeleryTransport(make_app(settings, redis_url=url), redis.Redis.from_url(url))
    try:
        yield found
    finally:
        found.close()
        stop_process(pid, needles=redis_needles(url))


def call(call_id: str, tool: str = "nap") -> CallMessage:
    return CallMessage.from_wire(message(call_id, tool, {"label": call_id}, workspace=Path(".")))


def opened(raw: bytes) -> dict:
    envelope = json.loads(raw)
    return {**envelope, "body": json.loads(base64.b64decode(envelope["body"]))}


def reads(transport: CeleryTransport) -> list[dict]:
    client = redis.Redis(connection_pool=transport.client.connection_pool)
    found = [opened(raw) for raw in reversed(client.lrange(READS, 0, -1))]
    client.delete(READS)
    return found


def events(pubsub) -> list[dict]:
    found, limit = [], time.monotonic() + 2
    while time.monotonic() < limit:
        got = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
        if got is None and found:
            break
        if got is not None:
            found.append(opened(got["data"]))
    return found


def without_what_varies(task: dict, event: dict | None = None) -> tuple[dict, dict | None]:
    task["body"][0][0].pop("sent_at")
    for key in ("id", "root_id"):
        task["headers"].pop(key)
    for key in ("delivery_tag", "correlation_id"):
        task["properties"].pop(key)
    if event is not None:
        event["properties"].pop("delivery_tag")
        for key in ("uuid", "root_id", "clock", "timestamp"):
            event["body"].pop(key)
    return task, event


def test_after_two_of_celerys_messages_the_rest_are_filled_in_and_are_the_same(transport):
    pubsub = redis.Redis(connection_pool=transport.client.connection_pool).pubsub()
    pubsub.subscribe(EVENTS)
    pubsub.get_message(timeout=1)
    stencils = transport.queue.stencils
    transport.post_marked("b1", [call("c1"), call("c2", "read_file")])  # Celery's, both
    assert stencils.usable() is not None
    reads(transport), events(pubsub)
    transport.post_marked("b2", [call("c3")])  # filled in
    transport.post([call("c3")], parallel=True)  # Celery's
    (filled, celerys), (filled_event, celerys_event) = reads(transport), events(pubsub)
    assert filled["headers"]["id"] == filled["headers"]["root_id"] == filled_event["body"]["uuid"]
    assert filled["headers"]["id"] != celerys["headers"]["id"]
    assert filled["properties"]["correlation_id"] == filled["headers"]["id"]
    assert filled_event["body"]["clock"] > celerys_event["body"]["clock"] - 2
    assert filled_event["body"]["name"] == "toolrun.nap"  # the shadow's, as Flower shows it
    assert without_what_varies(filled, filled_event) == without_what_varies(celerys, celerys_event)


def test_a_listener_to_celerys_publish_signals_sees_every_message(transport):
    transport.post_marked("b1", [call("c1"), call("c2")])
    seen: list[str] = []

    def listener(sender=None, headers=None, **_):
        seen.append(headers["id"])

    signals.before_task_publish.connect(listener, weak=False)
    try:
        transport.post_marked("b2", [call("c3"), call("c4")])
    finally:
        signals.before_task_publish.disconnect(listener)
    assert [m["headers"]["id"] for m in reads(transport)][2:] == seen
    assert len(seen) == 2


def test_a_stencil_that_does_not_remake_celerys_second_message_is_given_up(transport):
    """A message holding something more that changes per message (here a
    header of Celery's own, say a newer Celery's) is Celery's to build."""
    pipe = transport.client.pipeline(transaction=False)
    learner = Stencils(transport.app)
    kept = transport.queue.stencils
    transport.queue.stencils = recorder = Stencils(transport.app)
    seen: list = []
    recorder.learn = lambda commands, wire: seen.append((commands, wire))  # type: ignore[method-assign]
    transport.queue.ride(pipe, [call("c1"), call("c2")])
    transport.queue.stencils = kept
    pipe.reset()
    (first, first_wire), (second, second_wire) = seen
    name, (key, payload) = second[0]
    envelope = json.loads(payload)
    envelope["headers"]["x-sent"] = time.time()  # differs from the first message's
    learner.learn(first, first_wire)
    learner.learn([(name, (key, json.dumps(envelope))), *second[1:]], second_wire)
    assert learner.usable() is None and not learner.wanted()
    faithful = Stencils(transport.app)
    faithful.learn(first, first_wire)
    faithful.learn(second, second_wire)
    assert faithful.usable() is not None
