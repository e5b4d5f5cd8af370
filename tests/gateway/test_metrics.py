"""What an autoscaler scales on, at the gateway's /metrics: calls waiting in
each queue and running from it, read from the broker and the workers at each
scrape. Real Redis, real workers."""

from __future__ import annotations

import re
import time

from runtime.gateway.metrics import Metrics
from tests.support.tools import marks, release

SLOTS = 8  # the session stack's reads concurrency (tests/conftest.py)


def figure(text: str, name: str, queue: str) -> float:
    found = re.search(rf'^{name}\{{queue="{queue}"\}} (\S+)$', text, re.M)
    assert found, f"no {name} for {queue} in:\n{text}"
    return float(found[1])


def test_calls_waiting_and_running_per_queue_are_exported(runtime, workspace, request):
    request.addfinalizer(lambda: release(workspace, "scaled"))
    calls = [
        {"id": f"h{i}", "name": "held", "arguments": {"label": "scaled"}} for i in range(SLOTS + 3)
    ]
    handle = runtime.submit(calls, mode="auto", workspace=workspace)
    give_up = time.monotonic() + 30
    while len(marks(workspace, "held")) < SLOTS:  # every slot runs one
        assert time.monotonic() < give_up, "the reads never all started"
        time.sleep(0.05)
    text = Metrics(runtime).text().decode()
    assert figure(text, "toolrun_calls_running", "reads") == SLOTS
    assert figure(text, "toolrun_calls_waiting", "reads") >= 3  # past the slots
    assert figure(text, "toolrun_calls_waiting", "effects") >= 0
    release(workspace, "scaled")
    assert all(r.ok for r in handle.results(timeout=60))
