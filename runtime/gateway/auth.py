"""Bearer keys on every route but the health checks (docs/architecture.md,
"The HTTP gateway"). A missing, malformed, wrong or revoked key is a 401; the
token itself is never logged or echoed, only the key's name."""

from __future__ import annotations

from fastapi import Request

from runtime.gateway.keys import Key, authenticate
from runtime.gateway.problems import Unauthorized


def bearer(request: Request) -> Key:
    """The FastAPI dependency that names the key of a request."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("send an API key as `Authorization: Bearer <key>`")
    key = authenticate(request.app.state.gateway.keys, token.strip())
    if key is None:
        raise Unauthorized("the API key is unknown, wrong or revoked")
    request.state.key_name = key.name
    return key
