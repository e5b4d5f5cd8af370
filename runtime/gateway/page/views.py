"""The approvals page's routes (docs/architecture.md, "The approvals page"):
sign-in and sign-out, the page, its list as JSON, the list's live stream
(Server-Sent Events), and the answers, which go through the API's own
approve and deny (`gateway/approvals.py`): the same role checks, the same
visibility, the same remembered-rule limits, the key's name as the approver.
None of it is in the OpenAPI document: it is a page, not the API."""

from __future__ import annotations

import asyncio
import json
from html import escape
from importlib import resources
from string import Template
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from runtime import clock
from runtime.gateway import approvals
from runtime.gateway.keys import authenticate
from runtime.gateway.page import csrf, listing, session
from runtime.gateway.page.session import Viewer
from runtime.gateway.problems import Unauthorized
from runtime.keyring import Purpose

router = APIRouter(prefix=session.PATH, include_in_schema=False)
LOOK_EVERY = 1.0  # seconds between the stream's reads of the pending calls
HEADERS = {
    # No inline script or style, nothing from elsewhere, never in a frame.
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
}
FILES = {"page.js": "text/javascript", "page.css": "text/css"}


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: Literal["approve", "deny"]
    reason: str | None = Field(None, min_length=1, max_length=4000)
    arguments: dict[str, Any] | None = None
    remember: Literal["workspace", "submitter"] | None = None
    rule: str | None = Field(None, max_length=1000)


def _text(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text()


def _html(name: str, status: int = 200, **values: str) -> HTMLResponse:
    return HTMLResponse(Template(_text(name)).substitute(values), status, headers=HEADERS)


async def _signed_in(request: Request) -> Viewer:
    found = await session.viewer(request)
    if found is None:
        raise Unauthorized("sign in to the approvals page first")
    return found


SignedIn = Annotated[Viewer, Depends(_signed_in)]


@router.get("")
async def page(request: Request) -> Response:
    """The page: the calls waiting that the signed-in key may see, answered
    there; without a session, a redirect (303) to sign in."""
    found = await session.viewer(request)
    if found is None:
        return RedirectResponse(f"{session.PATH}/sign-in", 303, headers=HEADERS)
    token = csrf.token(request.app.state.gateway.runtime.key_for(Purpose.page_csrf), found.session)
    return _html("page.html", viewer=escape(found.key.name, quote=True), csrf=token)


@router.get("/sign-in")
async def sign_in_form() -> Response:
    """The sign-in form: one field, the API key."""
    return _html("sign_in.html", error="")


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    """The form posts the API key; the answer sets the session cookie. The
    key itself is kept nowhere (the page never sees it again)."""
    csrf.same_origin(request)
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (form.get("key") or [""])[0].strip()
    gateway = request.app.state.gateway
    key = await run_in_threadpool(authenticate, gateway.keys, token) if token else None
    if key is None:
        return _html("sign_in.html", 401, error="That key is unknown, wrong or revoked.")
    response = RedirectResponse(session.PATH, 303, headers=HEADERS)
    session.set_cookie(
        response, session.issue(gateway.runtime.key_for(Purpose.page_session), key.id)
    )
    return response


@router.post("/sign-out")
async def sign_out(request: Request, viewer: SignedIn) -> Response:
    """Forget the session cookie (a form with the CSRF token in a hidden field)."""
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    csrf.check(request, viewer.session, (form.get(csrf.FIELD) or [""])[0])
    response = RedirectResponse(f"{session.PATH}/sign-in", 303, headers=HEADERS)
    session.clear_cookie(response)
    return response


@router.get("/static/{name}")
async def static(name: str) -> Response:
    """The page's script and style sheet (`page.js`, `page.css`)."""
    if name not in FILES:
        return Response(status_code=404)
    return Response(_text(name), media_type=FILES[name], headers=HEADERS)


@router.get("/pending")
async def pending(request: Request, viewer: SignedIn) -> dict[str, Any]:
    """The page's list as JSON: each waiting call with its tool, redacted
    arguments, diff, rule and reason, and what the key may answer."""
    return await run_in_threadpool(listing.pending, request.app.state.gateway, viewer.key)


@router.get("/stream")
async def stream(request: Request, viewer: SignedIn) -> EventSourceResponse:
    """`event: approvals` with the whole list each time it changes (the
    waiting calls' ids read every `LOOK_EVERY`, the list made only when they
    changed); it ends once the viewer's key is revoked or its
    session expires. It holds
    one of the key's waits (`waits_per_key`), as a batch's event stream does."""
    gateway = request.app.state.gateway
    release = gateway.waits.take(viewer.key)

    async def changes():
        seen, last = None, None
        try:
            while viewer.session.expires > clock.now() and await gateway.standing.still_live(
                viewer.key.id
            ):
                rows = await run_in_threadpool(listing.waiting, gateway)
                ids = {(row.batch_id, row.call_id) for row in rows}
                if ids != seen:  # only then can the viewer's list differ
                    seen = ids
                    shown = await run_in_threadpool(listing.pending, gateway, viewer.key, rows)
                    if shown != last:
                        last = shown
                        yield {"event": "approvals", "data": json.dumps(shown)}
                await asyncio.sleep(LOOK_EVERY)
        finally:
            release()

    return EventSourceResponse(changes(), ping=15, sep="\n", background=BackgroundTask(release))


@router.post("/calls/{batch_id}/{call_id}")
def answer(
    batch_id: str, call_id: str, request: Request, viewer: SignedIn, body: Annotated[Answer, Body()]
) -> dict[str, Any]:
    """Approve (with edited arguments, and remembered), or deny with a reason."""
    csrf.check(request, viewer.session)
    if body.answer == "deny":
        denial = approvals.Denial(reason=body.reason) if body.reason else None
        return approvals.deny(batch_id, call_id, request, viewer.key, denial)
    approval = approvals.Approval(arguments=body.arguments, remember=body.remember, rule=body.rule)
    return approvals.approve(batch_id, call_id, request, viewer.key, approval)
