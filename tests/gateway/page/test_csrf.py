"""The approvals page's CSRF tokens and origin check
(runtime/gateway/page/csrf.py): one token per session, and a request from
another origin refused."""

from __future__ import annotations

import secrets

import pytest
from starlette.requests import Request

from runtime.gateway.page import csrf, session
from runtime.gateway.problems import Forbidden

KEY = secrets.token_bytes(32)


def _request(**headers: str) -> Request:
    raw = [(n.lower().replace("_", "-").encode(), v.encode()) for n, v in headers.items()]
    return Request({"type": "http", "method": "POST", "headers": raw, "path": "/"})


def test_each_session_has_a_token_of_its_own():
    one = session.read(KEY, session.issue(KEY, "abcdef012345"))
    two = session.read(KEY, session.issue(KEY, "abcdef012345"))
    assert csrf.token(KEY, one) == csrf.token(KEY, one)
    assert csrf.token(KEY, one) != csrf.token(KEY, two)
    assert csrf.token(KEY, one) != csrf.token(secrets.token_bytes(32), one)


def test_a_request_from_another_origin_is_refused():
    csrf.same_origin(_request(host="gw.example:8000"))  # no Origin: a same-origin GET or curl
    csrf.same_origin(_request(host="gw.example:8000", origin="https://gw.example:8000"))
    proxied = _request(host="10.0.0.5:8000", origin="https://gw.example")
    with pytest.raises(Forbidden):
        csrf.same_origin(proxied)
    csrf.same_origin(
        _request(host="10.0.0.5:8000", origin="https://gw.example", x_forwarded_host="gw.example")
    )
    for origin in ("https://evil.example", "null", "https://gw.example:8001"):
        with pytest.raises(Forbidden):
            csrf.same_origin(_request(host="gw.example:8000", origin=origin))
