"""Usage through a gateway in another process: `GET /v1/usage` (a key sees its
own, an admin every key's), the batch's usage in `GET /v1/batches/{id}`, and
Prometheus counters of calls, worker-seconds and spend by tool, key and status."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def echoes(count: int, text: str = "hi") -> list[dict]:
    return [{"id": f"e{i}", "name": "echo", "arguments": {"text": text}} for i in range(count)]


def run(client, space, count: int) -> str:
    body = {"calls": echoes(count), "mode": "auto", "workspace": str(space)}
    response = client.post("/v1/batches", json=body)
    assert response.status_code == 202, response.text
    batch_id = response.json()["batch_id"]
    state = client.get(f"/v1/batches/{batch_id}", params={"wait": 60}).json()
    assert state["state"] == "ended"
    return batch_id


def test_a_key_sees_its_own_usage_and_an_admin_every_keys(gateway, keys, space):
    with gateway.client(keys["submitter"]) as alice, gateway.client(keys["other"]) as oscar:
        batch_id = run(alice, space, 3)
        theirs = run(oscar, space, 2)
        oscar_name = oscar.get(f"/v1/batches/{theirs}").json()["submitted_by"]
        state = alice.get(f"/v1/batches/{batch_id}").json()
        usage = state["usage"]
        assert (usage["calls"], usage["ran"], usage["ok"]) == (3, 3, 3)
        assert usage["worker_seconds"] > 0 and usage["cpu_seconds"] >= 0
        assert all(r["usage"]["wall_ms"] > 0 for r in state["results"])

        own = alice.get("/v1/usage", params={"by": "key", "since": "1d"})
        assert own.status_code == 200, own.text
        rows = own.json()["rows"]
        assert [r["key"] for r in rows] == [f"key:{state['submitted_by']}"]
        assert rows[0]["calls"] >= 3
        by_tool = alice.get("/v1/usage", params={"by": "tool"}).json()["rows"]
        assert {r["tool"] for r in by_tool} == {"echo"}
        refused = alice.get("/v1/usage", params={"submitter": "key:someone-else"})
        assert refused.status_code == 403
        assert alice.get("/v1/usage", params={"since": "soon"}).status_code == 422

    with gateway.client(keys["admin"]) as admin:
        everyone = admin.get("/v1/usage", params={"by": "key"}).json()["rows"]
        names = {r["key"] for r in everyone}
        assert {rows[0]["key"], f"key:{oscar_name}"} <= names
        one = admin.get("/v1/usage", params={"by": "tool", "submitter": rows[0]["key"]})
        assert one.json()["rows"][0]["calls"] == rows[0]["calls"]


def test_metrics_count_calls_worker_seconds_and_spend_by_tool_key_and_status(gateway, keys, space):
    with gateway.client(keys["submitter"]) as alice:
        batch_id = run(alice, space, 2)
        who = f"key:{alice.get(f'/v1/batches/{batch_id}').json()['submitted_by']}"
    with gateway.client(keys["admin"]) as admin:
        text = admin.get("/metrics").text
    samples = {
        (s.name, s.labels.get("tool"), s.labels.get("key"), s.labels.get("status")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("toolrun_usage_")
    }
    assert samples[("toolrun_usage_calls_total", "echo", who, "ok")] >= 2
    assert samples[("toolrun_usage_worker_seconds_total", "echo", who, "ok")] > 0
    assert ("toolrun_usage_spend_total", "echo", who, "ok") in samples
