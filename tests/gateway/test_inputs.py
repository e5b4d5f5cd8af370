"""Inputs that stalled or broke the gateway (issue 25): each is a 4xx problem
from a gateway in another process, and leaves the connection and the gateway
usable for the next request."""

from __future__ import annotations

import json
import threading

import httpx

from runtime.gateway.keys import Role
from runtime.ledger.keys import Keys
from runtime.ledger.tables import EventKind
from tests.gateway.test_access import _problem
from tests.support.gateway import sse

# How long a revoked key's stream or poll may outlive the revocation here: a
# bound for a loaded machine, far below the 60 s poll and the 600 s approval.
BOUND = 30


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_workspace_with_a_long_path_component_is_a_4xx(gateway, keys, space):
    long = str(space / ("x" * 300))
    calls = [{"id": "1", "name": "read_file", "arguments": {"path": "a"}}]
    for who in ("submitter", "admin"):
        with gateway.client(keys[who]) as client:
            _problem(client.post("/v1/batches", json={"calls": calls, "workspace": long}), 422)
            params = {"mode": "auto", "workspace": long}
            _problem(client.get("/v1/tools", params=params), 422)
            assert client.get("/v1/tools", params={"mode": "auto"}).status_code == 200


def test_a_deeply_nested_message_is_a_4xx_on_a_connection_that_stays_open(gateway, keys, space):
    with gateway.client(keys["submitter"]) as alice:
        for depth in (500, 900):
            message = {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t", "name": "read_file", "input": _nested(depth)}
                ],
            }
            response = alice.post("/v1/batches", json={"message": message, "workspace": str(space)})
            assert 400 <= response.status_code < 500, response.text
            assert response.headers.get("connection", "").lower() != "close"
            assert alice.get("/healthz").status_code == 200  # on the same kept-alive connection


def test_an_empty_batch_is_refused_at_submit(gateway, keys, space):
    with gateway.client(keys["submitter"]) as alice:
        body = _problem(alice.post("/v1/batches", json={"calls": [], "workspace": str(space)}), 422)
        assert "no calls" in body["detail"]


def test_an_empty_idempotency_key_is_a_422_not_no_key(gateway, keys, space):
    calls = [{"id": "1", "name": "read_file", "arguments": {"path": "a"}}]
    with gateway.client(keys["submitter"]) as alice:
        response = alice.post(
            "/v1/batches",
            json={"calls": calls, "workspace": str(space)},
            headers={"Idempotency-Key": ""},
        )
        _problem(response, 422)


def test_a_retry_with_other_options_is_a_409(gateway, keys, space):
    calls = [{"id": "1", "name": "read_file", "arguments": {"path": "a"}}]
    body = {"calls": calls, "workspace": str(space), "mode": "default"}
    other = space / "other"
    other.mkdir()
    with gateway.client(keys["submitter"]) as alice:
        first = alice.post("/v1/batches", json=body, headers={"Idempotency-Key": "opts"})
        assert first.status_code == 202, first.text
        for change in (
            {"mode": "accept_edits"},
            {"workspace": str(other)},
            {"on_error": "continue"},
            {"rules": {"ask": ["read_file"]}},
        ):
            retry = alice.post(
                "/v1/batches", json=body | change, headers={"Idempotency-Key": "opts"}
            )
            assert retry.status_code == 409, (change, retry.text)


def test_a_wrong_method_says_what_is_allowed_and_head_healthz_answers(gateway, keys):
    with gateway.client(keys["admin"]) as admin:
        wrong = admin.delete("/v1/batches")
        _problem(wrong, 405)
        assert wrong.headers["allow"] == "POST"
        assert admin.put("/healthz").headers["allow"] == "GET, HEAD"
    head = httpx.head(f"{gateway.url}/healthz")
    assert head.status_code == 200 and head.content == b""


def test_an_approval_of_a_cancelled_call_leaves_the_list_and_is_a_409(gateway, keys, space):
    body = {
        "calls": [{"id": "w", "name": "write_file", "arguments": {"path": "c", "content": "c"}}],
        "workspace": str(space),
        "mode": "default",
    }
    with gateway.client(keys["submitter"]) as alice:
        batch_id = alice.post("/v1/batches", json=body).json()["batch_id"]
        with alice.stream("GET", f"/v1/batches/{batch_id}/events") as response:
            assert next(sse(response))["event"] == "notice"
        assert alice.post(f"/v1/batches/{batch_id}/cancel").status_code == 202
        state = alice.get(f"/v1/batches/{batch_id}", params={"wait": 30}).json()
        assert [r["status"] for r in state["results"]] == ["cancelled"]
    with gateway.client(keys["approver"]) as bob:
        listed = bob.get("/v1/approvals", params={"batch": batch_id}).json()["approvals"]
        assert listed == []
        _problem(bob.post(f"/v1/batches/{batch_id}/calls/w/approve"), 409)
        _problem(bob.post(f"/v1/batches/{batch_id}/calls/w/deny"), 409)
    kinds = [e.kind for e in gateway.ledger.events(batch_id, "w")]
    assert EventKind.approval_given not in kinds and EventKind.approval_refused not in kinds
    assert not (space / "c").exists()


def test_event_ids_do_not_grow_with_the_batch(gateway, keys, space):
    """An event's id is bounded, not the whole cursor: the stream's bytes grow
    with its calls, not with their square; a resume from any id sends the rest."""
    (space / "f").write_text("f")
    with gateway.client(keys["submitter"]) as alice:
        for count in (4, 400):
            calls = [
                {"id": f"c{i}", "name": "read_file", "arguments": {"path": "f"}}
                for i in range(count)
            ]
            batch_id = alice.post(
                "/v1/batches", json={"calls": calls, "workspace": str(space)}
            ).json()["batch_id"]
            with alice.stream("GET", f"/v1/batches/{batch_id}/events") as response:
                events = [e for e in sse(response) if e["event"] == "result"]
            assert len(events) == count
            assert max(len(e["id"]) for e in events) <= 40
            middle = count // 2
            with alice.stream(
                "GET",
                f"/v1/batches/{batch_id}/events",
                headers={"Last-Event-ID": events[middle]["id"]},
            ) as response:
                rest = [e["data"] for e in sse(response) if e["event"] == "result"]
            assert sorted(rest) == sorted(e["data"] for e in events[middle + 1 :])


def test_a_revoked_keys_streams_and_long_polls_end(gateway, keys, space):
    """Revoking a key ends what it has open: its event stream closes without
    the batch's results, and its long poll answers 401, both within a bound
    far below the approval's wait (the sweep's timers play no part)."""
    name = "revoked-dave"
    token = gateway.key(name, Role.submitter, roots=[space])
    body = {
        "calls": [{"id": "w", "name": "write_file", "arguments": {"path": "d", "content": "d"}}],
        "workspace": str(space),
        "mode": "default",
    }
    seen: list[dict] = []
    polled: list[httpx.Response] = []
    with gateway.client(token) as dave, gateway.client(token) as poller:
        batch_id = dave.post("/v1/batches", json=body).json()["batch_id"]
        noticed = threading.Event()

        def follow() -> None:
            with dave.stream("GET", f"/v1/batches/{batch_id}/events") as response:
                for event in sse(response):
                    seen.append(event)
                    noticed.set()

        def poll() -> None:
            polled.append(poller.get(f"/v1/batches/{batch_id}", params={"wait": 60}))

        streaming = threading.Thread(target=follow, daemon=True)
        polling = threading.Thread(target=poll, daemon=True)
        streaming.start()
        assert noticed.wait(30)
        polling.start()
        assert Keys(gateway.ledger).revoke(name)
        streaming.join(BOUND)
        polling.join(BOUND)
        assert not streaming.is_alive() and not polling.is_alive()
    assert [e["event"] for e in seen] == ["notice"]
    _problem(polled[0], 401)
    with gateway.client(keys["admin"]) as admin:  # the batch itself goes on, as its owner left it
        state = admin.get(f"/v1/batches/{batch_id}").json()
        assert state["state"] == "running" and state["awaiting_approval"]
        assert admin.post(f"/v1/batches/{batch_id}/cancel").status_code == 202


LONE = "\ud800"  # a lone surrogate: JSON can spell it (`"\ud800"`), UTF-8 cannot


def test_a_lone_surrogate_is_a_4xx_or_a_result_never_a_500(gateway, keys, space):
    """Issue 40: in a call id it was a 500, in a tool name the connection
    dropped (the ledger could not encode it). Now each string a client can
    send is a 4xx problem or a result the model can read, and the gateway
    goes on serving on the same connection."""
    (space / "p.txt").write_text("p")
    cases = {
        "id": {"id": f"c{LONE}", "name": "read_file", "arguments": {"path": "p.txt"}},
        "name": {"id": "n", "name": f"read{LONE}", "arguments": {"path": "p.txt"}},
        "arguments": {"id": "a", "name": "read_file", "arguments": {"path": f"p{LONE}.txt"}},
        "a key": {"id": "k", "name": "read_file", "arguments": {f"p{LONE}": "x"}},
    }
    with gateway.client(keys["submitter"]) as alice:
        for what, call in cases.items():
            body = {"calls": [call], "workspace": str(space)}
            sent = json.dumps(body).encode()  # ASCII: the surrogate as `\ud800`
            headers = {"content-type": "application/json"}
            response = alice.post("/v1/batches", content=sent, headers=headers, params={"wait": 30})
            assert response.status_code < 500, (what, response.text)
            if response.status_code >= 400:
                assert response.headers["content-type"] == "application/problem+json", what
            else:
                state = response.json()
                assert state["state"] == "ended", (what, state)
                result = state["results"][0]
                assert result["status"] in {"invalid_arguments", "unknown_tool", "error"}, result
                assert result["model_message"], result
            assert alice.get("/healthz").status_code == 200  # on the same connection
