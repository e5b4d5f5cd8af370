"""Batches through a gateway in another process: submit, events (resumed),
state (long poll), reply, idempotency, cancel, and who sees which batch."""

from __future__ import annotations

import json

from runtime.ledger.keys import Keys
from tests.support.gateway import sse


def _submit(client, body, **headers):
    response = client.post("/v1/batches", json=body, headers=headers)
    assert response.status_code == 202, response.text
    return response.json()["batch_id"]


def _events(client, batch_id, **headers):
    with client.stream("GET", f"/v1/batches/{batch_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(sse(response))


def test_a_batch_streams_one_event_per_result_then_its_reply(gateway, keys, space):
    (space / "a.txt").write_text("alpha\n")
    calls = [
        {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "w1", "name": "write_file", "arguments": {"path": "b.txt", "content": "b"}},
    ]
    with gateway.client(keys["submitter"]) as client:
        response = client.post(
            "/v1/batches", json={"calls": calls, "mode": "accept_edits", "workspace": str(space)}
        )
        assert response.status_code == 202
        batch_id = response.json()["batch_id"]
        assert response.headers["location"] == f"/v1/batches/{batch_id}"
        events = _events(client, batch_id)
        results = [json.loads(e["data"]) for e in events if e["event"] == "result"]
        assert sorted(r["call_id"] for r in results) == ["r1", "w1"]
        assert {r["status"] for r in results} == {"ok"}
        assert events[-1]["event"] == "end"
        state = client.get(f"/v1/batches/{batch_id}", params={"wait": 30}).json()
        assert state["state"] == "ended"
        assert [r["call_id"] for r in state["results"]] == ["r1", "w1"]
        assert state["submitted_by"].endswith("-alice")
        reply = client.get(f"/v1/batches/{batch_id}/reply", params={"format": "anthropic"})
        assert reply.status_code == 200
        blocks = reply.json()["content"]
        assert [b["tool_use_id"] for b in blocks] == ["r1", "w1"]
        assert (space / "b.txt").read_text() == "b"


def test_events_resume_from_last_event_id_without_repeats_or_gaps(gateway, keys, space):
    for name in "abc":
        (space / name).write_text(name)
    calls = [{"id": n, "name": "read_file", "arguments": {"path": n}} for n in "abc"]
    with gateway.client(keys["submitter"]) as client:
        batch_id = _submit(client, {"calls": calls, "workspace": str(space)})
        client.get(f"/v1/batches/{batch_id}", params={"wait": 30})
        with client.stream("GET", f"/v1/batches/{batch_id}/events") as response:
            first = next(sse(response))  # then the connection drops
        rest = _events(client, batch_id, **{"Last-Event-ID": first["id"]})
        ids = [json.loads(first["data"])["call_id"]]
        ids += [json.loads(e["data"])["call_id"] for e in rest if e["event"] == "result"]
        assert sorted(ids) == ["a", "b", "c"]
        again = _events(client, batch_id, **{"Last-Event-ID": rest[-2]["id"]})
        assert [e["event"] for e in again] == ["end"]


def test_a_provider_message_gets_its_reply_in_its_own_dialect(gateway, keys, space):
    (space / "m.txt").write_text("hello\n")
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "m.txt"}},
        ],
    }
    with gateway.client(keys["submitter"]) as client:
        batch_id = _submit(client, {"message": message, "workspace": str(space), "mode": "auto"})
        reply = client.get(f"/v1/batches/{batch_id}/reply", params={"wait": 30}).json()
        assert reply["role"] == "user"
        assert reply["content"][0]["type"] == "tool_result"
        assert reply["content"][0]["tool_use_id"] == "toolu_01"
        assert "hello" in json.dumps(reply["content"][0]["content"])


def test_a_submit_that_waits_answers_the_batchs_state_in_one_request(gateway, keys, space):
    (space / "p.txt").write_text("p")
    read = {"id": "r", "name": "read_file", "arguments": {"path": "p.txt"}}
    with gateway.client(keys["submitter"]) as alice:
        ended = alice.post(
            "/v1/batches", json={"calls": [read], "workspace": str(space)}, params={"wait": 30}
        )
        assert ended.status_code == 200, ended.text  # ended within the wait
        state = ended.json()
        assert ended.headers["location"] == f"/v1/batches/{state['batch_id']}"
        assert state["state"] == "ended" and state["results"][0]["status"] == "ok"
        assert state == alice.get(ended.headers["location"]).json()  # the long poll's body
        write = {"id": "w", "name": "write_file", "arguments": {"path": "q", "content": "q"}}
        body = {"calls": [write], "workspace": str(space), "mode": "default"}
        waiting = alice.post("/v1/batches", json=body, params={"wait": 0.2})
        assert waiting.status_code == 202, waiting.text  # still running when the wait ran out
        state = waiting.json()
        assert state["state"] == "running" and state["awaiting_approval"][0]["call_id"] == "w"
        assert alice.post(f"/v1/batches/{state['batch_id']}/cancel").status_code == 202


def test_the_same_idempotency_key_is_the_same_batch_for_its_key_only(gateway, keys, space):
    (space / "i.txt").write_text("i")
    body = {
        "calls": [{"id": "1", "name": "read_file", "arguments": {"path": "i.txt"}}],
        "workspace": str(space),
    }
    with gateway.client(keys["submitter"]) as alice, gateway.client(keys["other"]) as oscar:
        first = _submit(alice, body, **{"Idempotency-Key": "turn-1"})
        assert _submit(alice, body, **{"Idempotency-Key": "turn-1"}) == first
        assert _submit(oscar, body, **{"Idempotency-Key": "turn-1"}) != first
        other = {**body, "calls": [{"id": "2", "name": "read_file", "arguments": {"path": "x"}}]}
        refused = alice.post("/v1/batches", json=other, headers={"Idempotency-Key": "turn-1"})
        assert refused.status_code == 409
        assert refused.headers["content-type"] == "application/problem+json"
        denying = {**body, "rules": {"deny": ["read_file"]}}  # a retry must not change the rules
        refused = alice.post("/v1/batches", json=denying, headers={"Idempotency-Key": "turn-1"})
        assert refused.status_code == 409, refused.text
        assert "'turn-1' was used for a batch of other rules" in refused.json()["detail"]


def test_a_key_sees_only_its_own_batches_unless_admin(gateway, keys, space):
    (space / "s.txt").write_text("s")
    body = {
        "calls": [{"id": "1", "name": "read_file", "arguments": {"path": "s.txt"}}],
        "workspace": str(space),
    }
    with gateway.client(keys["submitter"]) as alice:
        batch_id = _submit(alice, body)
    # Its owner row went with the batch's record: another process reads it.
    assert Keys(gateway.ledger).owner(batch_id).key_name == "test_batches-alice"
    paths = [
        f"/v1/batches/{batch_id}",
        f"/v1/batches/{batch_id}/events",
        f"/v1/batches/{batch_id}/reply?format=openai",
    ]
    with gateway.client(keys["other"]) as oscar, gateway.client(keys["approver"]) as bob:
        for path in paths:
            for client in (oscar, bob):
                response = client.get(path)
                assert response.status_code == 404, (path, response.text)
                assert response.headers["content-type"] == "application/problem+json"
        assert oscar.post(f"/v1/batches/{batch_id}/cancel").status_code == 404
    with gateway.client(keys["admin"]) as admin:
        state = admin.get(f"/v1/batches/{batch_id}", params={"wait": 30})
        assert state.status_code == 200
        assert state.json()["state"] == "ended"


def test_cancel_ends_a_waiting_call_and_records_the_key(gateway, keys, space):
    body = {
        "calls": [{"id": "w", "name": "write_file", "arguments": {"path": "c", "content": "c"}}],
        "workspace": str(space),
        "mode": "default",
    }
    with gateway.client(keys["submitter"]) as alice:
        batch_id = _submit(alice, body)
        with alice.stream("GET", f"/v1/batches/{batch_id}/events") as response:
            assert next(sse(response))["event"] == "notice"
        cancelled = alice.post(f"/v1/batches/{batch_id}/cancel")
        assert cancelled.status_code == 202
        state = alice.get(f"/v1/batches/{batch_id}", params={"wait": 30}).json()
        assert [r["status"] for r in state["results"]] == ["cancelled"]
    row = gateway.ledger.batch(batch_id)
    owner = Keys(gateway.ledger).owner(batch_id)
    assert row.cancelled_by == owner.key_name
    assert not (space / "c").exists()


def test_a_traceparent_header_travels_in_the_batchs_signed_messages(gateway, keys, space):
    # The gateway here runs without the otel extra configured: the caller's
    # context still reaches the workers, in every message the plan holds.
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    calls = [{"id": "w1", "name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}]
    body = {"calls": calls, "mode": "default", "workspace": str(space)}  # asks: the plan stays
    with gateway.client(keys["submitter"]) as client:
        batch_id = _submit(client, body, traceparent=parent)
        plan = gateway.ledger.plan(batch_id)
        assert plan["traceparent"] == parent
        assert plan["calls"]["w1"]["message"]["traceparent"] == parent
        assert client.post(f"/v1/batches/{batch_id}/cancel").status_code in (200, 202)


def test_a_batch_over_the_size_cap_is_a_413_before_anything_is_written(gateway, keys, space):
    """The org policy sets no size, so the default cap of 1,000 calls per batch holds."""
    calls = [
        {"id": f"c{i}", "name": "read_file", "arguments": {"path": "a.txt"}} for i in range(1001)
    ]
    with gateway.client(keys["submitter"]) as client:
        response = client.post(
            "/v1/batches",
            json={"calls": calls, "mode": "default", "workspace": str(space)},
            headers={"Idempotency-Key": "too-large"},
        )
        assert response.status_code == 413
        problem = response.json()
        assert problem["title"] == "batch too large"
        assert "1001 calls and the policy allows 1000 per batch" in problem["detail"]


# The provider message of docs/how-to/http-api.md, posted without an Idempotency-Key:
# its turn key comes from the provider's call ids.
DOCS_MESSAGE = {
    "role": "assistant",
    "content": [
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "write_file",
            "input": {"path": "NOTES.md", "content": "hi"},
        }
    ],
}


def _same_turn_by_two_keys(gateway, keys, space) -> None:
    body = {"mode": "default", "message": DOCS_MESSAGE, "workspace": str(space)}
    with gateway.client(keys["submitter"]) as alice, gateway.client(keys["other"]) as oscar:
        first = _submit(alice, body)
        second = oscar.post("/v1/batches", json=body)
        assert second.status_code == 202, second.text  # not a 409 telling it the turn exists
        theirs = second.json()["batch_id"]
        assert theirs != first
        for probe in (
            oscar.get(f"/v1/batches/{first}"),
            oscar.get(f"/v1/batches/{first}/transcript"),
            oscar.post(f"/v1/batches/{first}/cancel"),
        ):
            assert probe.status_code == 404, probe.text
        assert _submit(alice, body) == first  # the same key's turn again attaches
        mine = alice.get(f"/v1/batches/{first}")
        assert mine.status_code == 200, mine.text
        assert mine.json()["awaiting_approval"][0]["call_id"] == "toolu_1"
        assert oscar.get(f"/v1/batches/{theirs}").status_code == 200
        assert alice.get(f"/v1/batches/{theirs}").status_code == 404
        for client, batch_id in ((alice, first), (oscar, theirs)):
            assert client.post(f"/v1/batches/{batch_id}/cancel").status_code == 202
    assert gateway.ledger.batch(first).cancelled_by == Keys(gateway.ledger).owner(first).key_name


def test_the_same_provider_turn_from_two_keys_makes_two_batches(gateway, keys, space):
    _same_turn_by_two_keys(gateway, keys, space)


def test_with_limits_the_second_key_gets_no_409_for_anothers_turn(gateway, keys, space):
    settings = space / ".toolrun" / "settings.json"
    settings.parent.mkdir()
    limits = {"rate": [{"name": "per-key", "per": "key", "limit": "600/minute"}]}
    settings.write_text(json.dumps({"limits": limits}))
    _same_turn_by_two_keys(gateway, keys, space)
