"""The gateway's app factory: what it builds from the settings it is given."""

from __future__ import annotations

import json

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
