"""`toolrun mcp serve --http PORT`: the MCP face over Streamable HTTP, bound by
the HTTP gateway's keys (docs/architecture.md, "Integrations"): every request
carries a live submitter or admin key as a bearer token; a call runs with the
key as its submitter, in a mode no higher than the key's and only if the
server's workspace lies inside the key's roots; only an admin key's client is
asked to answer an approval (an elicitation). Needs the `mcp` and `gateway`
extras."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import uvicorn
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from runtime.client import Runtime
from runtime.gateway.keys import Key, Role, authenticate
from runtime.gateway.problems import Problem
from runtime.gateway.roles import mode_for, within
from runtime.integrations.batches import Options
from runtime.integrations.mcp_server import Refused, server
from runtime.ledger.keys import Keys
from runtime.types import Mode

KEY = "toolrun_key"  # where the caller's key waits for the handlers, in the request's state


class RequireKey:
    """Every HTTP request needs a live submitter or admin key: 401 without one."""

    def __init__(self, app: ASGIApp, keys: Keys) -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        key = None
        if scheme.lower() == "bearer" and token:
            key = await anyio.to_thread.run_sync(authenticate, self.keys, token.strip())
        if key is None or key.role not in (Role.submitter, Role.admin):
            said = "a live submitter or admin key of the gateway, as a bearer token"
            await JSONResponse({"error": f"unauthorized: this server needs {said}"}, 401)(
                scope, receive, send
            )
            return
        scope.setdefault("state", {})[KEY] = key
        await self.app(scope, receive, send)


def bound(ctx: Any, options: Options) -> Options:
    """The server's options as the request's key may use them."""
    key: Key = ctx.request.state.toolrun_key
    try:
        mode = mode_for(key, Mode(options.mode or Mode.default))
    except Problem as problem:
        raise Refused(problem.detail) from None
    if key.roots is not None and not within(str(options.workspace), key.roots):
        raise Refused(f"this server's workspace is outside the roots of key {key.name!r}")
    # Only a key that may answer approvals answers one at its client (the
    # gateway's rule): a submitter's call that asks waits for an approver.
    answers = options.client_answers and key.role is Role.admin
    return replace(options, mode=mode.value, submitter=key.principal, client_answers=answers)


def principal(ctx: Any) -> str | None:
    """Who made the request: its key, to which its request state is bound."""
    return ctx.request.state.toolrun_key.principal


def serve_http(rt: Runtime, options: Options, host: str, port: int) -> None:
    """Serve on http://host:port/mcp until stopped; the batches stay the cluster's."""
    app = server(rt, options, bind=bound, principal=principal).streamable_http_app(host=host)
    try:
        uvicorn.run(RequireKey(app, Keys(rt.ledger)), host=host, port=port, log_config=None)
    finally:
        rt.close(cancel=False)
