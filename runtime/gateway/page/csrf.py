"""CSRF protection of the approvals page's answers (docs/architecture.md, "The
approvals page"). Each session has one token, an HMAC of its nonce under the
signing key's derived key for CSRF (runtime/keyring.py): the page carries it
in a `<meta>` its script sends back as `X-CSRF-Token`, and forms in a hidden
`csrf` field. Every state-changing request must carry it and, when the
browser says where it comes from (`Origin`), come from the gateway itself;
else a 403 and nothing changes. The SameSite=Strict cookie already keeps
other sites' requests unsigned-in; this is the second lock."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

from fastapi import Request

from runtime.gateway.page.session import Session
from runtime.gateway.problems import Forbidden
from runtime.keyring import Purpose

HEADER = "x-csrf-token"
FIELD = "csrf"


def token(own: bytes, session: Session) -> str:
    """The session's CSRF token under the page's CSRF key
    (`Runtime.key_for(Purpose.page_csrf)`)."""
    return hmac.new(own, session.nonce.encode(), hashlib.sha256).hexdigest()


def check(request: Request, session: Session, given: str | None = None) -> None:
    """A 403 unless the request carries the session's token (`given`, from a
    form's field, else the header) and comes from this origin."""
    same_origin(request)
    sent = given if given is not None else request.headers.get(HEADER, "")
    expected = token(request.app.state.gateway.runtime.key_for(Purpose.page_csrf), session)
    if not hmac.compare_digest(sent.encode(), expected.encode()):
        raise Forbidden("the page's CSRF token is missing or wrong: reload the page")


def same_origin(request: Request) -> None:
    """A 403 for a request a browser says came from another origin: one whose
    `Origin` names neither the `Host` it was sent to nor, behind a proxy, the
    `X-Forwarded-Host` the proxy says the browser used (a page of another
    origin can set neither)."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    hosts = {request.headers.get("host", ""), request.headers.get("x-forwarded-host", "")}
    if urlsplit(origin).netloc not in hosts - {""}:
        raise Forbidden("a request from another origin")
