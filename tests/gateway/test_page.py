"""The approvals page over HTTP, against a gateway in another process
(docs/architecture.md, "The approvals page"): sign-in sets a Secure,
HTTP-only, SameSite cookie that carries a session and not the key; without
it the page sends the browser to sign in; an answer without the session's
CSRF token, or from another origin, is a 403 and changes nothing; a key sees
only the calls it may see; and an answer with the token goes through."""

from __future__ import annotations

import json

from runtime.gateway.keys import Role
from runtime.ledger.keys import Keys
from tests.support.gateway import sse
from tests.support.page import csrf_of, sign_in, signed_in, waiting
from tests.support.waiting import wait_for


def _listed(client) -> list[tuple[str, str]]:
    found = client.get("/approvals/pending")
    assert found.status_code == 200, found.text
    return [(call["batch_id"], call["call_id"]) for call in found.json()["calls"]]


def test_without_a_session_the_page_sends_the_browser_to_sign_in(gateway):
    with gateway.client() as client:
        page = client.get("/approvals")
        assert page.status_code == 303 and page.headers["location"] == "/approvals/sign-in"
        forged = client.get("/approvals", headers={"Cookie": "toolrun_session=a.1.b.c"})
        assert forged.status_code == 303
        assert client.get("/approvals/pending").status_code == 401
        form = client.get("/approvals/sign-in")
        assert form.status_code == 200 and 'name="key"' in form.text
        assert "frame-ancestors 'none'" in form.headers["content-security-policy"]


def test_sign_in_sets_a_secure_cookie_that_carries_no_key(gateway, keys):
    assert sign_in(gateway, "trk_000000000000_wrong").status_code == 401
    answer = sign_in(gateway, keys["approver"])
    assert answer.status_code == 303 and answer.headers["location"] == "/approvals"
    cookie = answer.headers["set-cookie"]
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "secure", "samesite=strict", "path=/approvals"} <= attributes
    secret = keys["approver"].split("_", 2)[2]  # a token_urlsafe: it may hold "_" itself
    assert keys["approver"] not in cookie and secret not in cookie


def test_an_answer_without_the_csrf_token_is_refused_and_changes_nothing(gateway, keys, space):
    batch_id = waiting(gateway, keys["submitter"], space)
    path = f"/approvals/calls/{batch_id}/w"
    with signed_in(gateway, keys["approver"]) as bob:
        token = csrf_of(bob)
        assert bob.post(path, json={"answer": "approve"}).status_code == 403
        wrong = bob.post(path, json={"answer": "approve"}, headers={"X-CSRF-Token": "0" * 64})
        assert wrong.status_code == 403
        elsewhere = {"X-CSRF-Token": token, "Origin": "https://evil.example"}
        assert bob.post(path, json={"answer": "approve"}, headers=elsewhere).status_code == 403
        with signed_in(gateway, keys["admin"]) as other_session:  # another session's token
            foreign = {"X-CSRF-Token": csrf_of(other_session)}
            assert bob.post(path, json={"answer": "deny"}, headers=foreign).status_code == 403
        assert (batch_id, "w") in _listed(bob)  # nothing was answered
        edited = {"answer": "approve", "arguments": {"path": "w.txt", "content": "edited"}}
        answer = bob.post(path, json=edited, headers={"X-CSRF-Token": token})
        assert answer.status_code == 200, answer.text
        assert answer.json()["by"] == "test_page-bob"
    with gateway.client(keys["submitter"]) as alice:
        state = alice.get(f"/v1/batches/{batch_id}", params={"wait": 60}).json()
    assert [r["status"] for r in state["results"]] == ["ok"]
    assert (space / "w.txt").read_text() == "edited"


def test_a_key_sees_only_the_calls_it_may_see(gateway, keys, space, tmp_path):
    batch_id = waiting(gateway, keys["submitter"], space)
    far = gateway.key("page-far-away", Role.approver, roots=[tmp_path])
    with signed_in(gateway, far) as faraway, signed_in(gateway, keys["other"]) as oscar:
        assert (batch_id, "w") not in _listed(faraway)
        assert (batch_id, "w") not in _listed(oscar)
        path = f"/approvals/calls/{batch_id}/w"
        refused = faraway.post(
            path, json={"answer": "approve"}, headers={"X-CSRF-Token": csrf_of(faraway)}
        )
        assert refused.status_code == 404
    with signed_in(gateway, keys["submitter"]) as alice:  # sees its own, may not answer
        shown = alice.get("/approvals/pending").json()
        assert (batch_id, "w") in [(c["batch_id"], c["call_id"]) for c in shown["calls"]]
        assert shown["can_answer"] is False
        answer = alice.post(
            path, json={"answer": "approve"}, headers={"X-CSRF-Token": csrf_of(alice)}
        )
        assert answer.status_code == 403
    with signed_in(gateway, keys["approver"]) as bob:
        [call] = [
            c for c in bob.get("/approvals/pending").json()["calls"] if c["batch_id"] == batch_id
        ]
        assert call["tool"] == "write_file" and call["rule"] == "mode:default"
        assert call["diff"] == {"path": "w.txt", "lines": ["+ hi"]}
        denial = {"answer": "deny", "reason": "not today"}
        assert (
            bob.post(path, json=denial, headers={"X-CSRF-Token": csrf_of(bob)}).status_code == 200
        )


def test_the_stream_lists_the_waiting_calls_and_a_revoked_key_signs_out(gateway, keys, space):
    batch_id = waiting(gateway, keys["submitter"], space)
    name = "page-short-lived"
    token = gateway.key(name, Role.approver)
    with signed_in(gateway, token) as viewer:
        with viewer.stream("GET", "/approvals/stream", timeout=60) as response:
            first = next(sse(response))
        assert first["event"] == "approvals"
        shown = json.loads(first["data"])
        assert (batch_id, "w") in [(c["batch_id"], c["call_id"]) for c in shown["calls"]]
        assert Keys(gateway.ledger).revoke(name)
        wait_for(
            lambda: viewer.get("/approvals").status_code == 303, 30, "the session to end", every=0.2
        )
    with gateway.client(keys["admin"]) as admin:
        assert admin.post(f"/v1/batches/{batch_id}/calls/w/deny").status_code == 200


def test_approve_and_remember_on_the_page_keeps_to_the_keys_role(gateway, keys, space):
    batch_id = waiting(gateway, keys["submitter"], space)
    path = f"/approvals/calls/{batch_id}/w"
    with signed_in(gateway, keys["approver"]) as bob:
        token = {"X-CSRF-Token": csrf_of(bob)}
        wider = {"answer": "approve", "remember": "workspace", "rule": "write_file(*.txt)"}
        refused = bob.post(path, json=wider, headers=token)
        assert refused.status_code == 403 and "only an admin" in refused.json()["detail"]
        assert (batch_id, "w") in _listed(bob)
        answer = bob.post(path, json={"answer": "approve", "remember": "workspace"}, headers=token)
        assert answer.status_code == 200, answer.text
    assert answer.json()["remembered"]["rule"] == f"write_file({(space / 'w.txt').resolve()})"
    with gateway.client(keys["submitter"]) as alice:
        alice.get(f"/v1/batches/{batch_id}", params={"wait": 60})
        again = {"id": "w", "name": "write_file", "arguments": {"path": "w.txt", "content": "2"}}
        body = {"calls": [again], "workspace": str(space), "mode": "default"}
        done = alice.post("/v1/batches", params={"wait": 60}, json=body)
    assert [r["status"] for r in done.json()["results"]] == ["ok"], done.text  # nobody asked


def test_a_denial_on_the_page_carries_its_reason_to_the_model(gateway, keys, space):
    batch_id = waiting(gateway, keys["submitter"], space)
    with signed_in(gateway, keys["admin"]) as root:
        denial = {"answer": "deny", "reason": "not on a Friday"}
        answer = root.post(
            f"/approvals/calls/{batch_id}/w", json=denial, headers={"X-CSRF-Token": csrf_of(root)}
        )
        assert answer.status_code == 200 and answer.json()["answer"] == "denied"
    with gateway.client(keys["submitter"]) as alice:
        [result] = alice.get(f"/v1/batches/{batch_id}", params={"wait": 60}).json()["results"]
    assert result["status"] == "denied" and "not on a Friday" in result["model_message"]


def test_sign_out_needs_the_csrf_token_and_clears_the_cookie(gateway, keys):
    with signed_in(gateway, keys["approver"]) as bob:
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        assert bob.post("/approvals/sign-out", content="csrf=0", headers=form).status_code == 403
        out = bob.post("/approvals/sign-out", content=f"csrf={csrf_of(bob)}", headers=form)
    assert out.status_code == 303 and out.headers["location"] == "/approvals/sign-in"
    assert out.headers["set-cookie"].startswith('toolrun_session="";')
