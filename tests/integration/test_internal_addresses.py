"""`http_get` on a real worker: an internal address is `denied` unless the org
policy the batch was submitted under names it; the worker learns the allowed
hosts from the signed policy, not from its own environment."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.conftest import runtime_on
from tests.support.web import serving


@pytest.fixture
def inner() -> Iterator[str]:
    """An internal service, on loopback, as Flower or the gateway would be."""
    with serving() as port:
        yield f"http://127.0.0.1:{port}/"


def _fetch(runtime, url, workspace):
    call = {"id": "h", "name": "http_get", "arguments": {"url": url}}
    return runtime.submit([call], mode="bypass", workspace=workspace).results(timeout=60)[0]


def test_loopback_is_denied_even_in_bypass_mode(runtime, inner, tmp_path):
    result = _fetch(runtime, inner, tmp_path)
    assert result.status.value == "denied", result
    assert "loopback" in result.model_message and "inner" not in result.model_message
    assert result.error.kind == "internal_address"


def test_the_org_policy_lets_a_named_range_through(stack, user_settings, inner, tmp_path):
    policy = tmp_path / "org.json"
    policy.write_text(json.dumps({"internal_hosts": ["127.0.0.0/8"]}))
    client = runtime_on(stack, user_settings, policy_file=policy)
    try:
        result = _fetch(client, inner, tmp_path)
    finally:
        client.close()
    assert result.status.value == "ok", result
    assert result.content["text"] == "inner"
