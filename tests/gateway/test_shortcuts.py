"""The submit and its long poll answered without FastAPI's route when well
formed; everything else handed to the route with its body intact."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from runtime import memory_runtime
from runtime.gateway.app import create_app
from runtime.gateway.keys import Role, authenticate, mint
from runtime.gateway.shortcuts import Shortcuts

ROUTE_ANSWER = 299  # what the stand-in for FastAPI's routes answers


@pytest.fixture
def shortcut(tmp_path):
    """`Shortcuts` over a stand-in for the routes, which records what reaches
    it, on a gateway app over an in-memory runtime; a submitter key,
    authenticated already (a token the gateway knows: its first request
    reads the ledger, through the route), and its workspace."""
    space = tmp_path / "space"
    space.mkdir()
    reached: list[tuple[str, str, bytes]] = []

    async def routes(scope, receive, send):
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        reached.append((scope["method"], scope["path"], body))
        await send({"type": "http.response.start", "status": ROUTE_ANSWER, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    with memory_runtime(workspace=space) as rt:
        app = create_app(rt.settings, rt)
        gateway = app.state.gateway
        token = mint(gateway.keys, "alice", Role.submitter, roots=[str(space)])
        gateway.standing.found(token, authenticate(gateway.keys, token))
        client = TestClient(Shortcuts(routes, api=app), base_url="http://gw")
        client.headers["Authorization"] = f"Bearer {token}"
        yield client, space, reached


def test_a_well_formed_submit_and_poll_never_reach_the_route(shortcut):
    client, space, reached = shortcut
    calls = [{"id": "r", "name": "list_dir", "arguments": {"path": "."}}]
    batch = {"calls": calls, "workspace": str(space)}
    submitted = client.post("/v1/batches", json=batch, headers={"Idempotency-Key": "k1"})
    assert submitted.status_code == 202, submitted.text
    batch_id = submitted.json()["batch_id"]
    assert submitted.headers["location"] == f"/v1/batches/{batch_id}"
    state = client.get(f"/v1/batches/{batch_id}", params={"wait": 30})
    assert state.status_code == 200, state.text
    assert state.json()["state"] == "ended"
    assert [r["call_id"] for r in state.json()["results"]] == ["r"]
    waited = client.post("/v1/batches", json=batch, params={"wait": 30})
    assert waited.status_code == 200 and waited.json()["state"] == "ended", waited.text
    unknown = client.get("/v1/batches/nothing")  # the route's answer: a problem
    assert unknown.status_code == 404
    assert unknown.headers["content-type"] == "application/problem+json"
    assert reached == []


@pytest.mark.parametrize(
    ("params", "headers", "body"),
    [
        ({"wait": "61"}, {}, None),  # past MAX_WAIT: the route's 422 names the field
        ({"wait": "soon"}, {}, None),
        ({}, {"Idempotency-Key": ""}, None),
        ({}, {"traceparent": "0" * 129}, None),
        ({}, {}, b'{"calls": ['),  # malformed JSON: the route's 400
        ({}, {}, b'{"calls": [], "message": {}}'),  # both kinds: the route's 422
        ({}, {}, b'{"calls": [], "surprise": 1}'),
        ({}, {}, b"[" * 100_000),  # deeper than the parser goes
        ({}, {}, b""),
        ({}, {"Content-Type": "text/plain"}, None),
        ({}, {"Authorization": "Bearer trk_000000000000_unknown"}, None),
        ({}, {"Authorization": "Basic abc"}, None),
    ],
)
def test_anything_else_reaches_the_route_with_its_body(shortcut, params, headers, body):
    client, space, reached = shortcut
    if body is None:
        body = json.dumps({"calls": [], "workspace": str(space)}).encode()
    headers = {"Content-Type": "application/json"} | headers
    answer = client.post("/v1/batches", params=params, headers=headers, content=body)
    assert answer.status_code == ROUTE_ANSWER
    assert reached == [("POST", "/v1/batches", body)]


def test_what_it_answers_is_counted_under_the_routes_templates(tmp_path):
    space = tmp_path / "space"
    space.mkdir()
    with memory_runtime(workspace=space) as rt:
        app = create_app(rt.settings, rt)
        token = mint(app.state.gateway.keys, "alice", Role.submitter, roots=[str(space)])
        client = TestClient(app, base_url="http://gw", headers={"Authorization": f"Bearer {token}"})
        calls = [{"id": "r", "name": "list_dir", "arguments": {"path": "."}}]
        for _ in range(2):  # the first authenticates through the route, the second not
            batch = client.post("/v1/batches", json={"calls": calls, "workspace": str(space)})
            assert batch.status_code == 202, batch.text
            state = client.get(f"/v1/batches/{batch.json()['batch_id']}", params={"wait": 30})
            assert state.status_code == 200, state.text
        text = client.get("/metrics").text
    assert 'method="POST",route="/v1/batches",status="202"} 2.0' in text
    assert 'method="GET",route="/v1/batches/{batch_id}",status="200"} 2.0' in text
