"""Keys, roles and bad input at a gateway in another process: 401 and 403
with problem bodies, every bad request a 4xx problem and never a 500."""

from __future__ import annotations

import json

import httpx
import pytest

from runtime.gateway.keys import Role
from runtime.ledger.keys import Keys
from tests.gateway.conftest import ORG_ALLOW

PROBLEM = "application/problem+json"


def _problem(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


def _batch(space, **extra):
    return {
        "calls": [{"id": "1", "name": "read_file", "arguments": {"path": "x"}}],
        "workspace": str(space),
        **extra,
    }


def test_every_endpoint_but_health_needs_a_key(gateway, keys, space):
    token = gateway.key("revoked-carol", Role.admin)
    Keys(gateway.ledger).revoke("revoked-carol")
    with httpx.Client(base_url=gateway.url) as anyone:
        assert anyone.get("/healthz").json() == {"status": "ok"}
        assert anyone.get("/readyz").json() == {"status": "ready"}
        assert "/v1/batches" in anyone.get("/openapi.json").json()["paths"]
        for method, path in [
            ("GET", "/v1/approvals"),
            ("GET", "/v1/tools"),
            ("GET", "/metrics"),
            ("GET", "/v1/batches/x"),
            ("POST", "/v1/batches"),
            ("POST", "/v1/batches/x/cancel"),
            ("POST", "/v1/batches/x/calls/y/approve"),
        ]:
            for headers in (
                {},
                {"Authorization": "Bearer trk_000000000000_nope"},
                {"Authorization": f"Bearer {token}"},
                {"Authorization": token},
            ):
                response = anyone.request(method, path, headers=headers, json=_batch(space))
                _problem(response, 401)
                assert response.headers["www-authenticate"] == "Bearer"


def test_roles_and_confinement_are_403(gateway, keys, space, tmp_path):
    with gateway.client(keys["approver"]) as bob:
        _problem(bob.post("/v1/batches", json=_batch(space)), 403)
    with gateway.client(keys["submitter"]) as alice:
        assert (
            "bypass"
            in _problem(alice.post("/v1/batches", json=_batch(space, mode="bypass")), 403)["detail"]
        )
        outside = alice.post("/v1/batches", json=_batch(tmp_path))
        assert "outside the roots" in _problem(outside, 403)["detail"]
        escape = alice.post("/v1/batches", json=_batch(f"{space}/../../.."))
        _problem(escape, 403)
        beyond = alice.post("/v1/batches", json=_batch(space, rules={"allow": ["shell"]}))
        assert "shell" in _problem(beyond, 403)["detail"]
        allowed = alice.post(
            "/v1/batches", json=_batch(space, rules={"allow": [ORG_ALLOW], "deny": ["shell"]})
        )
        assert allowed.status_code == 202, allowed.text
        _problem(alice.post("/v1/batches/x/calls/y/approve"), 403)
        _problem(alice.post("/v1/batches/x/calls/y/deny", json={"reason": "no"}), 403)


def test_a_submitter_without_a_mode_gets_default_or_its_maximum(gateway, space):
    from runtime.types import Mode

    token = gateway.key("planner-pat", Role.submitter, roots=[space], max_mode=Mode.plan)
    with gateway.client(token) as pat:
        batch_id = pat.post("/v1/batches", json=_batch(space)).json()["batch_id"]
        assert pat.get(f"/v1/batches/{batch_id}").json()["mode"] == "plan"
        no_workspace = pat.post("/v1/batches", json={"calls": _batch(space)["calls"]})
        assert no_workspace.json()["batch_id"]


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b"{not json", 400),
        (b'{"calls": "read_file"}', 422),
        (b'{"calls": [], "message": {}}', 422),
        (b'{"calls": [{"id": "1", "name": "read_file"}], "mode": "godmode"}', 422),
        (b'{"calls": [{"id": "1", "name": "read_file"}], "timeout": -1}', 422),
        (b'{"calls": [{"id": "1", "name": "read_file"}], "by": "mallory"}', 422),
        (b'{"calls": [{"id": "1"}, {"id": "1"}]}', 422),
        (b'{"calls": [{"id": "1", "name": "x"}, {"id": "1", "name": "x"}]}', 422),
        (b'{"message": {"role": "assistant", "content": []}}', 422),
        (b'{"message": {"unknown": "shape"}}', 422),
        (b"[1, 2]", 422),
        (b'"text"', 422),
        (b"\xff\xfe", 400),
    ],
)
def test_bad_input_is_a_4xx_problem(gateway, keys, content, status):
    with gateway.client(keys["submitter"]) as alice:
        response = alice.post(
            "/v1/batches", content=content, headers={"Content-Type": "application/json"}
        )
        _problem(response, status)


def test_unusable_paths_and_strings_are_4xx_or_results(gateway, keys, space):
    with gateway.client(keys["admin"]) as admin:
        for workspace in ("a\u0000b", "\ud800", "~nobody-here/x", str(space / "missing")):
            content = json.dumps(_batch(space) | {"workspace": workspace}).encode()
            response = admin.post(
                "/v1/batches", content=content, headers={"Content-Type": "application/json"}
            )
            _problem(response, 422)
        _problem(admin.get("/v1/tools", params={"mode": "auto", "workspace": "a\x00b"}), 422)
    with gateway.client(keys["submitter"]) as alice:
        odd = '{"calls": [{"id": "s", "name": "echo", "arguments": {"text": "\\ud800"}}], '
        odd += '"mode": "auto"}'
        response = alice.post(
            "/v1/batches", content=odd.encode(), headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 202, response.text
        batch_id = response.json()["batch_id"]
        state = alice.get(f"/v1/batches/{batch_id}", params={"wait": 30}).json()
        assert [r["status"] for r in state["results"]] == ["invalid_arguments"]


def test_bad_requests_elsewhere_are_4xx_problems(gateway, keys):
    big = b'{"calls": [], "pad": "' + b"x" * (9 * 1024 * 1024) + b'"}'
    with gateway.client(keys["admin"]) as admin:
        _problem(
            admin.post("/v1/batches", content=big, headers={"Content-Type": "application/json"}),
            413,
        )
        _problem(admin.get("/v1/batches/no-such-batch"), 404)
        _problem(admin.get("/v1/batches/no-such-batch/events"), 404)
        _problem(admin.get("/v1/batches/x/events", headers={"Last-Event-ID": "zz"}), 400)
        _problem(admin.get("/v1/batches/x", params={"wait": 1000}), 422)
        _problem(admin.get("/v1/tools", params={"format": "cobol"}), 422)
        _problem(admin.post("/v1/batches/x/calls/y/approve", json={"by": "mallory"}), 422)
        _problem(admin.post("/v1/batches/x/calls/y/approve", json={"arguments": 3}), 422)
        _problem(admin.post("/v1/batches/x/calls/y/approve"), 404)
        _problem(admin.get("/no/such/route"), 404)
        _problem(admin.delete("/v1/batches"), 405)


def test_metrics_and_tools_answer_a_key(gateway, keys, space):
    with gateway.client(keys["submitter"]) as alice:
        metrics = alice.get("/metrics")
        assert metrics.status_code == 200
        assert "toolrun_gateway_requests_total" in metrics.text
        for cluster in (  # the cluster's figures, beside the gateway's own
            'toolrun_calls_waiting{queue="reads"}',
            'toolrun_calls_running{queue="effects"}',
            "toolrun_approvals_pending",
            'toolrun_cluster_up{store="redis"} 1.0',
        ):
            assert cluster in metrics.text
        tools = alice.get("/v1/tools", params={"format": "openai", "mode": "plan"}).json()
        names = {tool["function"]["name"] for tool in tools["tools"]}
        assert "read_file" in names and "write_file" not in names
        _problem(alice.get("/v1/tools", params={"mode": "bypass"}), 403)


def test_what_the_gateway_returns_and_logs_is_redacted(gateway, keys, space):
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    body = {
        "calls": [{"id": "e", "name": "echo", "arguments": {"text": f"token {secret}"}}],
        "workspace": str(space),
        "mode": "auto",
    }
    with gateway.client(keys["submitter"]) as alice:
        batch_id = alice.post("/v1/batches", json=body).json()["batch_id"]
        seen = [alice.get(f"/v1/batches/{batch_id}", params={"wait": 30}).text]
        with alice.stream("GET", f"/v1/batches/{batch_id}/events") as response:
            seen.append(response.read().decode())
        seen.append(alice.get(f"/v1/batches/{batch_id}/reply", params={"format": "openai"}).text)
    for text in seen:
        assert secret not in text
        assert "[REDACTED:" in text
    log = gateway.log.read_text()
    assert batch_id in log
    for token in keys.values():
        assert token not in log
    assert json.dumps(secret) not in log
