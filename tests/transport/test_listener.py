"""One subscription per client, on the session stack's real Redis: results reach
the inbox of their own batch, a cancel from anywhere reaches its batch, and a
result published while nobody listened is found in the hash."""

import pytest
import redis

from runtime.results import formatter as results
from runtime.transport.listener import Listener
from runtime.transport.redis_state import RedisState


def ok(call_id: str):
    return results.success(call_id, "nap", "slept", max_bytes=1024)


@pytest.fixture
def client(stack):
    found = redis.Redis.from_url(stack.redis_url)
    yield found
    found.close()


@pytest.fixture
def listener(client):
    found = Listener(client)
    yield found
    found.close()


def test_results_reach_the_inbox_of_their_batch(client, listener):
    first, second = listener.watch("lst-a"), listener.watch("lst-b")
    RedisState(client).publish("lst-a", ok("c1"), reply_to=listener.channel)
    RedisState(client).publish("lst-b", ok("c1"), reply_to=listener.channel)
    assert [r.call_id for r in first.results({"c1"}, timeout=5)] == ["c1"]
    assert [r.call_id for r in second.results({"c1"}, timeout=5)] == ["c1"]
    assert first.results({"c2"}, timeout=0.2) == []


def test_a_cancel_from_another_client_reaches_the_batch(stack, listener):
    inbox = listener.watch("lst-cancel")
    RedisState(redis.Redis.from_url(stack.redis_url)).cancel("lst-cancel", by="ops")
    inbox.results({"c1"}, timeout=5)
    assert inbox.cancelled


def test_a_result_published_before_the_batch_listened_is_read_from_the_hash(client, listener):
    RedisState(client).publish("lst-early", ok("c1"), reply_to=listener.channel)
    inbox = listener.watch("lst-early")
    inbox.gap = True  # as after a dropped connection
    assert [r.call_id for r in inbox.results({"c1"}, timeout=0.1)] == ["c1"]
