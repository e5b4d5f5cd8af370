"""A gateway that stops leaves its clients' batches to the cluster: a batch
waiting for approval is still waiting in the next gateway process, and its
events resume there from the client's Last-Event-ID."""

from __future__ import annotations

import json

from runtime.gateway.keys import Role
from tests.support.gateway import running_gateway, sse


def test_a_batch_outlives_the_gateway_that_took_it(stack, user_settings, tmp_path):
    space = tmp_path / "space"
    space.mkdir()
    (space / "a.txt").write_text("a")
    calls = [
        {"id": "r", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "w", "name": "write_file", "arguments": {"path": "b.txt", "content": "b"}},
    ]
    with running_gateway(stack, user_settings, tmp_path / "first.log") as first:
        submitter = first.key("restart-alice", Role.submitter, roots=[space])
        approver = first.key("restart-bob", Role.approver)
        with first.client(submitter) as alice:
            body = {"calls": calls, "workspace": str(space), "mode": "default"}
            batch_id = alice.post("/v1/batches", json=body).json()["batch_id"]
            with alice.stream("GET", f"/v1/batches/{batch_id}/events") as response:
                seen = []
                for event in sse(response):
                    seen.append(event)
                    if event["event"] == "notice":
                        break
    assert {json.loads(e["data"])["call_id"] for e in seen} == {"r", "w"}
    with running_gateway(stack, user_settings, tmp_path / "second.log") as second:
        with second.client(approver) as bob:
            assert bob.post(f"/v1/batches/{batch_id}/calls/w/approve").status_code == 200
        with second.client(submitter) as alice:
            with alice.stream(
                "GET", f"/v1/batches/{batch_id}/events", headers={"Last-Event-ID": seen[-1]["id"]}
            ) as response:
                rest = list(sse(response))
    assert [(e["event"], json.loads(e["data"]).get("call_id")) for e in rest] == [
        ("result", "w"),
        ("end", None),
    ]
    assert json.loads(rest[0]["data"])["status"] == "ok"
    assert (space / "b.txt").read_text() == "b"
