"""The approvals page's sign-in session (docs/architecture.md, "The approvals
page"). Signing in posts an API key once; the cookie then carries a session
token, never the key: `<key id>.<expiry>.<nonce>.<signature>`, the signature an
HMAC-SHA256 under the signing key's derived key for page sessions
(runtime/keyring.py), so the gateway stores nothing per session and any
gateway process of the deployment reads it. A session lives as long as its
key: a revoked key's sessions end at their next request (the key's row is
read, through `auth.Standing`, as a bearer token's is)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from runtime import clock
from runtime.gateway.keys import Key, key_of
from runtime.keyring import Purpose

COOKIE_NAME = "toolrun_session"
PATH = "/approvals"  # the cookie goes to the page's routes and nowhere else
LIFETIME = 8 * 3600  # seconds a session lasts after sign-in


@dataclass(frozen=True)
class Session:
    key_id: str
    expires: int
    nonce: str  # what its CSRF token is made from (csrf.py)


@dataclass(frozen=True)
class Viewer:
    """A signed-in request: its key (as the ledger holds it now) and session."""

    key: Key
    session: Session


def issue(own: bytes, key_id: str, *, lifetime: int = LIFETIME) -> str:
    """A session token for `key_id`, signed with the page's session key
    (`Runtime.key_for(Purpose.page_session)`)."""
    payload = f"{key_id}.{int(clock.now()) + lifetime}.{secrets.token_urlsafe(18)}"
    return f"{payload}.{_sign(own, payload)}"


def read(own: bytes, token: str | None) -> Session | None:
    """The session `token` stands for; None if malformed, forged or expired."""
    parts = (token or "").split(".")
    if len(parts) != 4:
        return None
    key_id, expires, nonce, signature = parts
    if not hmac.compare_digest(signature, _sign(own, f"{key_id}.{expires}.{nonce}")):
        return None
    if not expires.isdigit() or int(expires) <= clock.now():
        return None
    return Session(key_id, int(expires), nonce)


def _sign(own: bytes, payload: str) -> str:
    return hmac.new(own, payload.encode(), hashlib.sha256).hexdigest()


async def viewer(request: Request) -> Viewer | None:
    """The request's signed-in key, or None: no cookie, a bad or expired
    one, or a key since revoked."""
    gateway = request.app.state.gateway
    session = read(gateway.runtime.key_for(Purpose.page_session), request.cookies.get(COOKIE_NAME))
    if session is None or not await gateway.standing.still_live(session.key_id):
        return None
    row = await run_in_threadpool(gateway.keys.get, session.key_id)
    if row is None or row.revoked_at is not None:
        return None
    request.state.key_name = row.name
    return Viewer(key_of(row), session)


def set_cookie(response: Response, token: str) -> None:
    """Secure (HTTPS only; browsers count http://localhost as secure too),
    HTTP-only (no script reads it) and SameSite=Strict (no other site's page
    sends it)."""
    response.set_cookie(
        COOKIE_NAME,
        token,
        max_age=LIFETIME,
        path=PATH,
        secure=True,
        httponly=True,
        samesite="strict",
    )


def clear_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE_NAME, path=PATH, secure=True, httponly=True, samesite="strict")
