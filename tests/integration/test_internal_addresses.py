"""`http_get` on a real worker: an internal address is `denied` unless the org
policy the batch was submitted under names it; the worker learns the allowed
hosts from the signed policy, not from its own environment."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import runtime_on


class Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"inner")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def inner() -> Iterator[str]:
    """An internal service, on loopback, as Flower or the gateway would be."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


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
