"""What an autoscaler scales on, at the gateway's /metrics: calls waiting in
each queue and running from it, read from the broker and the workers at each
scrape. Real Redis, real workers."""

from __future__ import annotations

import re
import uuid

from runtime.gateway.metrics import Metrics
from tests.support.tools import marks, release
from tests.support.waiting import wait_for

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
    wait_for(lambda: len(marks(workspace, "held")) >= SLOTS, 30, "start of a read in every slot")
    text = Metrics(runtime).text().decode()
    assert figure(text, "toolrun_calls_running", "reads") == SLOTS
    assert figure(text, "toolrun_calls_waiting", "reads") >= 3  # past the slots
    assert figure(text, "toolrun_calls_waiting", "effects") >= 0
    release(workspace, "scaled")
    assert all(r.ok for r in handle.results(timeout=60))


def _series(text: str, label: str) -> set[str]:
    """Every value `label` takes in the exposition `text`."""
    return set(re.findall(rf'{label}="([^"]*)"', text))


def test_a_key_that_is_not_admin_sees_no_other_keys_series(gateway, keys, space):
    from runtime.gateway.keys import Role

    (space / "a.txt").write_text("a")
    calls = [{"id": "r", "name": "read_file", "arguments": {"path": "a.txt"}}]
    body = {"calls": calls, "workspace": str(space)}
    with gateway.client(keys["submitter"]) as alice, gateway.client(keys["other"]) as oscar:
        for client in (alice, oscar):
            ended = client.post("/v1/batches", json=body, params={"wait": 30})
            assert ended.json()["state"] == "ended", ended.text
        theirs = _series(oscar.get("/metrics").text, "key")
        mine = _series(alice.get("/metrics").text, "key")
    alice_name, oscar_name = "key:test_metrics-alice", "key:test_metrics-oscar"
    assert oscar_name in theirs and alice_name not in theirs
    assert alice_name in mine and oscar_name not in mine
    watcher = gateway.key("test_metrics-prometheus", Role.metrics)
    for token in (keys["admin"], watcher):
        with gateway.client(token) as client:
            assert {alice_name, oscar_name} <= _series(client.get("/metrics").text, "key")


def test_unknown_tool_names_share_one_label_value(gateway, keys, space):
    names = [f"no-such-tool-{uuid.uuid4().hex}" for _ in range(300)]
    calls = [{"id": f"c{i}", "name": name, "arguments": {}} for i, name in enumerate(names)]
    with gateway.client(keys["submitter"]) as alice:
        ended = alice.post(
            "/v1/batches", json={"calls": calls, "workspace": str(space)}, params={"wait": 30}
        )
        assert ended.json()["state"] == "ended", ended.text
    with gateway.client(keys["admin"]) as admin:
        text = admin.get("/metrics").text
    tools = _series(text, "tool")
    assert "(unknown)" in tools
    assert not tools & set(names)


def test_toolrun_metrics_folds_unknown_tools_too(runtime, workspace):
    from prometheus_client import generate_latest

    from runtime.gateway.metrics import cluster_registry

    name = f"no-such-tool-{uuid.uuid4().hex}"
    handle = runtime.submit([{"id": "u", "name": name}], mode="auto", workspace=workspace)
    assert [r.status.value for r in handle.results(timeout=60)] == ["unknown_tool"]
    text = generate_latest(cluster_registry(runtime)).decode()
    assert 'tool="(unknown)"' in text and name not in text
