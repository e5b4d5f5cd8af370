"""A real reads worker's task events: every call's `task-received`,
`task-started` and `task-succeeded` still reach a monitor, in a few
publishes (`workers/events.py`)."""

from __future__ import annotations

import base64
import json
import time

import pytest
import redis

pytestmark = pytest.mark.timeout(60)
KINDS = {"task-received", "task-started", "task-succeeded"}


def _events(message: dict) -> list[dict]:
    """The events one publish on Celery's event exchange carries (one, or a burst)."""
    envelope = json.loads(message["data"])  # kombu's: its body is base64 JSON
    body = json.loads(base64.b64decode(envelope["body"]))
    return body if isinstance(body, list) else [body]


def test_every_call_s_events_arrive_in_bursts(stack, runtime, workspace):
    client = redis.Redis.from_url(stack.redis_url)
    pubsub = client.pubsub()
    pubsub.psubscribe("*celeryev/task.*")
    pubsub.get_message(timeout=5)  # the subscription's confirmation
    calls = [{"id": f"e{i}", "name": "echo", "arguments": {"text": str(i)}} for i in range(8)]
    handle = runtime.submit(calls, mode="auto", workspace=workspace)
    assert all(r.status.value == "ok" for r in handle.results(timeout=30))

    seen: dict[str, set[str]] = {}  # task id -> the kinds of its events
    ours: set[str] = set()  # the tasks of this batch, as their received events name it
    publishes = events = 0
    deadline = time.monotonic() + 20
    while len(ours) < len(calls) or any(seen.get(task, set()) < KINDS for task in ours):
        assert time.monotonic() < deadline, f"events seen: {seen}"
        message = pubsub.get_message(timeout=1)
        if message is None or message["type"] != "pmessage":
            continue
        burst = [e for e in _events(message) if e.get("type") in KINDS]
        publishes += bool(burst)
        events += len(burst)
        for event in burst:
            seen.setdefault(event["uuid"], set()).add(event["type"])
            if event["type"] == "task-received" and handle.batch_id in event.get("args", ""):
                ours.add(event["uuid"])
    pubsub.close()
    # Bursts: sent a turn of the event loop at a time, these took 19 publishes.
    assert publishes * 2 <= events
