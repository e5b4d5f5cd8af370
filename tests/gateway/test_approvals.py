"""Approvals through a gateway in another process: who sees them, who answers
them, and that the ledger records the answering key's name."""

from __future__ import annotations

from runtime.gateway.keys import Role
from runtime.ledger.tables import EventKind
from tests.support.gateway import sse


def _waiting(gateway, token, space, name="w.txt"):
    body = {
        "calls": [
            {"id": "w", "name": "write_file", "arguments": {"path": name, "content": "first"}}
        ],
        "workspace": str(space),
        "mode": "default",
    }
    with gateway.client(token) as client:
        batch_id = client.post("/v1/batches", json=body).json()["batch_id"]
        with client.stream("GET", f"/v1/batches/{batch_id}/events") as response:
            assert next(sse(response))["event"] == "notice"
    return batch_id


def _listed(client, batch_id):
    approvals = client.get("/v1/approvals", params={"batch": batch_id}).json()["approvals"]
    return [(row["batch_id"], row["call_id"]) for row in approvals]


def test_an_approver_key_answers_and_the_ledger_names_it(gateway, keys, space):
    batch_id = _waiting(gateway, keys["submitter"], space)
    with gateway.client(keys["approver"]) as bob:
        assert _listed(bob, batch_id) == [(batch_id, "w")]
        path = f"/v1/batches/{batch_id}/calls/w/approve"
        answer = bob.post(path, json={"arguments": {"path": "w.txt", "content": "edited"}})
        assert answer.status_code == 200, answer.text
        assert answer.json()["by"] == "test_approvals-bob"
        again = bob.post(path)
        assert again.status_code == 409
        assert again.headers["content-type"] == "application/problem+json"
    with gateway.client(keys["submitter"]) as alice:
        state = alice.get(f"/v1/batches/{batch_id}", params={"wait": 30}).json()
    assert [r["status"] for r in state["results"]] == ["ok"]
    assert (space / "w.txt").read_text() == "edited"
    given = [e for e in gateway.ledger.events(batch_id, "w") if e.kind == EventKind.approval_given]
    assert [e.approver for e in given] == ["test_approvals-bob"]


def test_a_denial_carries_its_reason_to_the_model(gateway, keys, space):
    batch_id = _waiting(gateway, keys["submitter"], space)
    with gateway.client(keys["admin"]) as admin:
        path = f"/v1/batches/{batch_id}/calls/w/deny"
        assert admin.post(path, json={"reason": "not on a Friday"}).status_code == 200
        state = admin.get(f"/v1/batches/{batch_id}", params={"wait": 30}).json()
    [result] = state["results"]
    assert result["status"] == "denied"
    assert "not on a Friday" in result["model_message"]
    refused = [
        e for e in gateway.ledger.events(batch_id, "w") if e.kind == EventKind.approval_refused
    ]
    assert [e.approver for e in refused] == ["test_approvals-root"]


def test_approvals_are_seen_by_their_submitter_and_approvers_in_reach(
    gateway, keys, space, tmp_path
):
    batch_id = _waiting(gateway, keys["submitter"], space)
    elsewhere = gateway.key("approvals-far-away", Role.approver, roots=[tmp_path])
    with gateway.client(keys["submitter"]) as alice:
        assert _listed(alice, batch_id) == [(batch_id, "w")]
    with gateway.client(keys["other"]) as oscar, gateway.client(elsewhere) as far:
        assert _listed(oscar, batch_id) == []
        assert _listed(far, batch_id) == []
        assert far.post(f"/v1/batches/{batch_id}/calls/w/approve").status_code == 404
    with gateway.client(keys["approver"]) as bob:
        assert bob.post(f"/v1/batches/{batch_id}/calls/w/deny").status_code == 200


def test_updated_arguments_the_tool_cannot_take_end_the_call_not_the_gateway(gateway, keys, space):
    batch_id = _waiting(gateway, keys["submitter"], space)
    with gateway.client(keys["approver"]) as bob:
        body = b'{"arguments": {"path": "w.txt", "content": "\\ud800", "extra": 1}}'
        answer = bob.post(
            f"/v1/batches/{batch_id}/calls/w/approve",
            content=body,
            headers={"Content-Type": "application/json"},
        )
        assert answer.status_code in (200, 409, 422), answer.text
    with gateway.client(keys["submitter"]) as alice:
        state = alice.get(f"/v1/batches/{batch_id}", params={"wait": 30}).json()
    assert state["state"] == "ended"
    assert [r["status"] for r in state["results"]] != ["ok"]
    assert not (space / "w.txt").exists()


def test_approve_and_remember_grants_no_more_than_the_keys_role(gateway, keys, space):
    """An approver remembers the call's narrowest rule only; an admin may widen it."""
    batch_id = _waiting(gateway, keys["submitter"], space)
    path = f"/v1/batches/{batch_id}/calls/w/approve"
    with gateway.client(keys["approver"]) as bob:
        wider = bob.post(path, json={"remember": "workspace", "rule": "write_file(*.txt)"})
        assert wider.status_code == 403 and "only an admin" in wider.json()["detail"]
        assert _listed(bob, batch_id) == [(batch_id, "w")]  # nothing was answered
        answer = bob.post(path, json={"remember": "workspace"})
        assert answer.status_code == 200, answer.text
    exact = f"write_file({(space / 'w.txt').resolve()})"
    assert answer.json()["remembered"]["rule"] == exact
    assert answer.json()["remembered"]["for"] == str(space.resolve())

    body = {"calls": [], "workspace": str(space), "mode": "default"}
    with gateway.client(keys["submitter"]) as alice:
        again = {"id": "w", "name": "write_file", "arguments": {"path": "w.txt", "content": "2"}}
        done = alice.post("/v1/batches", params={"wait": 30}, json={**body, "calls": [again]})
        assert [r["status"] for r in done.json()["results"]] == ["ok"], done.text
    assert (space / "w.txt").read_text() == "2"  # remembered: nobody was asked

    other = _waiting(gateway, keys["submitter"], space, name="other.txt")  # not that rule's
    with gateway.client(keys["admin"]) as root:
        path = f"/v1/batches/{other}/calls/w/approve"
        answer = root.post(path, json={"remember": "workspace", "rule": "write_file(*.txt)"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["remembered"]["rule"] == "write_file(*.txt)"
