"""The gateway's app factory: what it builds from the settings it is given."""

from __future__ import annotations

import json
import uuid

from fastapi.testclient import TestClient

from runtime import Settings, memory_runtime
from runtime.gateway.app import create_app


def test_every_body_is_redacted_with_the_gateways_own_patterns(tmp_path):
    user = tmp_path / "user.json"
    user.write_text(json.dumps({}))
    settings = Settings(
        home=tmp_path, user_settings_file=user, redaction_patterns={"acme": r"ACME-\d{8}"}
    )
    with memory_runtime(settings=settings) as rt, TestClient(create_app(settings, rt)) as client:
        missing = client.get("/no/such/ACME-12345678")
    assert missing.status_code == 404
    assert missing.json()["instance"] == "/no/such/[REDACTED:acme]"


def test_a_gateway_whose_broker_is_away_is_not_ready(stack, user_settings, tmp_path):
    """The broker apart from the state's Redis (TOOLRUN_BROKER_URL): /readyz asks it too."""
    from runtime.stack.processes import free_port
    from tests.support.gateway import running_gateway

    away = f"amqp://guest:guest@127.0.0.1:{free_port()}//"  # nothing listens there
    with (
        running_gateway(
            stack, user_settings, tmp_path / "gateway.log", TOOLRUN_BROKER_URL=away
        ) as gateway,
        gateway.client() as anyone,
    ):
        answer = anyone.get("/readyz")
    assert answer.status_code == 503, answer.text
    assert "not ready" in answer.text


def test_the_access_log_names_the_refused_requests_not_the_answered_ones(gateway, keys):
    """uvicorn writes a request's line before its answer: once the client has
    the answer, the line is in the log if it is ever to be."""
    answered, refused = (f"/v1/tools?probe={uuid.uuid4().hex}" for _ in range(2))
    with gateway.client(keys["admin"]) as admin:
        assert admin.get(answered).status_code == 200
    with gateway.client("trk_000000000000_not-a-key") as stranger:
        assert stranger.get(refused).status_code == 401
    log = gateway.log.read_text()
    assert f'"GET {refused} HTTP/1.1" 401' in log
    assert answered not in log


def test_at_debug_the_access_log_names_every_request_once(stack, user_settings, tmp_path):
    """TOOLRUN_LOG_LEVEL=DEBUG: uvicorn's own access log, every request; the
    refused one is not written a second time by the gateway's counter."""
    from tests.support.gateway import running_gateway

    answered, refused = (f"/healthz?probe={uuid.uuid4().hex}" for _ in range(2))
    refused = refused.replace("/healthz", "/v1/tools")
    with (
        running_gateway(
            stack, user_settings, tmp_path / "gateway.log", TOOLRUN_LOG_LEVEL="DEBUG"
        ) as gateway,
        gateway.client("trk_000000000000_not-a-key") as stranger,
    ):
        assert stranger.get(answered).status_code == 200
        assert stranger.get(refused).status_code == 401
    log = gateway.log.read_text()
    assert log.count(f'"GET {answered} HTTP/1.1" 200') == 1
    assert log.count(f'"GET {refused} HTTP/1.1" 401') == 1
