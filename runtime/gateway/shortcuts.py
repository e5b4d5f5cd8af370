"""The two requests of a client's loop, a submit (`POST /v1/batches`) and its
long poll (`GET /v1/batches/{id}`), answered without FastAPI's per-request
machinery when they are well formed (docs/architecture.md, "The HTTP gateway").

FastAPI still declares both routes: the OpenAPI document describes them, and
any request this cannot take as it is (a key not authenticated within
`auth.RECHECK`, a parameter out of bounds, a body that is not a valid
`Submission`, another content type) goes to FastAPI's route, which answers
it as it always has, with the body this read given again. What a request
taken here runs is the routes' own (`batches.submitted`, `batches.polled`),
and what it raises goes to the app's problem handlers, so its answers are
those of the routes. It sits inside the middleware that bounds bodies and
counts requests, and names the route as FastAPI's router does, so a request
is counted under the same template."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import FastAPI
from pydantic import Field, TypeAdapter, ValidationError
from starlette.datastructures import Headers, QueryParams
from starlette.exceptions import HTTPException
from starlette.middleware.exceptions import ExceptionMiddleware

from runtime.gateway import batches

try:  # FastAPI's own spans, when tracing is on, name a request by its route
    from fastapi.telemetry._api import _route_selected
except ImportError:  # a FastAPI without them

    def _route_selected(*, scope, path, mount=False) -> None:
        pass


PREFIX = "/v1/batches"
WAIT = TypeAdapter(Annotated[float, Field(ge=0, le=batches.MAX_WAIT)])
IDEMPOTENCY_KEY = TypeAdapter(Annotated[str, Field(min_length=1, max_length=batches.KEY_CHARS)])
TRACEPARENT = TypeAdapter(Annotated[str, Field(max_length=batches.TRACEPARENT_CHARS)])


class Pass(Exception):
    """The request is FastAPI's to answer."""


class Shortcuts:
    def __init__(self, app, api: FastAPI) -> None:
        """`api`: the gateway's app, for its problem handlers (read when the
        middleware stack is built, at the first request: all are installed)."""
        self.app, self.api = app, api
        routes = {getattr(route, "endpoint", None): route for route in batches.router.routes}
        self.submit_route, self.state_route = routes[batches.submit], routes[batches.state]
        handlers = {k: v for k, v in api.exception_handlers.items() if k not in (500, Exception)}
        # As FastAPI's own stack: a handled exception becomes its problem;
        # any other goes on out, to the app's 500.
        self.answer = ExceptionMiddleware(self._answer, handlers=handlers)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            method, path = scope["method"], scope["path"]
            if (method == "POST" and path == PREFIX) or (
                method == "GET" and _batch_id(path) is not None
            ):
                return await self.answer(scope, receive, send)
        await self.app(scope, receive, send)

    async def _answer(self, scope, receive, send) -> None:
        body = await _body(receive) if scope["method"] == "POST" else None
        try:
            response = await self._respond(scope, body)
        except Pass:
            if body is not None:
                receive = _again(body, receive)
            return await self.app(scope, receive, send)
        await response(scope, receive, send)

    async def _respond(self, scope, body: bytes | None):
        gateway = self.api.state.gateway
        headers = Headers(scope=scope)
        key = _known_key(gateway, headers)
        scope.setdefault("state", {})["key_name"] = key.name  # as `auth.bearer`
        query = QueryParams(scope["query_string"]) if scope["query_string"] else {}
        wait = _valid(WAIT, query.get("wait", 0))
        if body is None:
            batch_id = _batch_id(scope["path"])
            _matched(scope, self.state_route, {"batch_id": batch_id})
            return await batches.polled(gateway, key, batch_id, wait)
        submission = _submission(headers, body)
        idempotency_key, traceparent = headers.get("idempotency-key"), headers.get("traceparent")
        if idempotency_key is not None:
            _valid(IDEMPOTENCY_KEY, idempotency_key)
        if traceparent is not None:
            _valid(TRACEPARENT, traceparent)
        _matched(scope, self.submit_route, {})
        return await batches.submitted(gateway, submission, key, idempotency_key, traceparent, wait)


def _matched(scope, route, path_params: dict[str, str]) -> None:
    """What FastAPI's router writes in the scope of a request it routes."""
    scope["route"], scope["path_params"] = route, path_params
    _route_selected(scope=scope, path=route.path_format)


def _batch_id(path: str) -> str | None:
    """The id of `/v1/batches/{id}` (one path segment, as FastAPI's router matches it)."""
    if not path.startswith(PREFIX + "/"):
        return None
    batch_id = path[len(PREFIX) + 1 :]
    return batch_id if batch_id and "/" not in batch_id else None


def _known_key(gateway: Any, headers: Headers):
    """The key of a bearer token authenticated within `auth.RECHECK` (else
    `auth.bearer` reads it off the event loop, or answers the 401)."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    token = token.strip()
    key = gateway.standing.known(token) if scheme.lower() == "bearer" and token else None
    if key is None:
        raise Pass
    return key


def _valid(adapter: TypeAdapter, value: Any) -> Any:
    try:
        return adapter.validate_python(value)
    except ValidationError:
        raise Pass from None  # FastAPI's route names the field in its 422


def _submission(headers: Headers, body: bytes) -> batches.Submission:
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json" or not body:
        raise Pass
    try:
        return batches.Submission.model_validate(json.loads(body))
    except Exception:  # noqa: BLE001 - malformed, too deep, wrong: FastAPI's route says which
        raise Pass from None


async def _body(receive) -> bytes:
    """The request's body, read as FastAPI's route reads it (`BodyLimit`'s 413 included)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise HTTPException(400, "There was an error parsing the body")
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _again(body: bytes, receive):
    """A `receive` that gives `body` once more, then what the client sends."""
    given = False

    async def again():
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again
