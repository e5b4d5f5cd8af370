"""RFC 9457 problem details: every error the gateway answers is one
`application/problem+json` body, made here (docs/architecture.md, "The HTTP gateway").
Bad input is a 4xx; a 500 means a fault of the gateway, never of the request."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from runtime.errors import (
    BatchTooLarge,
    ConfigurationError,
    InvalidBatch,
    LedgerUnavailable,
    TooManyOpenBatches,
)
from runtime.redaction import BUILT_IN, Redactor

log = logging.getLogger("toolrun.gateway")
MEDIA_TYPE = "application/problem+json"


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route's problem answers: each status with the
    problem body, as `application/problem+json`, for a client generator to read."""
    schema = {
        "type": "object",
        "required": ["type", "title", "status", "detail"],
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "instance": {"type": "string"},
            "errors": {"type": "array", "items": {"type": "object"}},
        },
    }
    return {
        status: {
            "description": HTTPStatus(status).phrase,
            "content": {MEDIA_TYPE: {"schema": schema}},
        }
        for status in statuses
    }


class Problem(Exception):
    def __init__(self, status: int, title: str, detail: str, **extra) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.extra = status, title, detail, extra


class Unauthorized(Problem):
    def __init__(self, detail: str) -> None:
        super().__init__(401, "unauthorized", detail)


class Forbidden(Problem):
    def __init__(self, detail: str) -> None:
        super().__init__(403, "forbidden", detail)


class NotFound(Problem):
    def __init__(self, detail: str) -> None:
        super().__init__(404, "not found", detail)


def response(
    status: int,
    title: str,
    detail: str,
    instance: str | None = None,
    *,
    redactor: Redactor = BUILT_IN,
    headers: dict[str, str] | None = None,
    **extra,
) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if instance:
        body["instance"] = instance
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(
        redactor.redact({**body, **extra}),
        status_code=status,
        media_type=MEDIA_TYPE,
        headers=headers,
    )


def install(app: FastAPI, redactor: Redactor = BUILT_IN) -> None:
    """Every way a request can fail becomes a problem body, redacted with the
    gateway's `redactor` (from its settings)."""

    def problem(*args, **extra) -> JSONResponse:
        return response(*args, redactor=redactor, **extra)

    @app.exception_handler(Problem)
    async def _problem(request: Request, error: Problem) -> JSONResponse:
        return problem(error.status, error.title, error.detail, request.url.path, **error.extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        errors = [
            {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
            for e in error.errors()
        ]
        said = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        if any(e.get("type") == "json_invalid" for e in error.errors()):
            return problem(400, "malformed JSON", said, request.url.path, errors=errors)
        return problem(422, "invalid request", said, request.url.path, errors=errors)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, error: HTTPException) -> JSONResponse:
        title = HTTPStatus(error.status_code).phrase.lower()
        given = {name.lower(): value for name, value in (error.headers or {}).items()}
        headers = {}
        if "allow" in given:  # a 405 names the methods its route takes (RFC 9110)
            headers["Allow"] = ", ".join(sorted(m.strip() for m in given["allow"].split(",")))
        return problem(
            error.status_code, title, str(error.detail), request.url.path, headers=headers
        )

    @app.exception_handler(InvalidBatch)
    async def _batch(request: Request, error: InvalidBatch) -> JSONResponse:
        if isinstance(error, BatchTooLarge):  # a size limit of the policy ("Flow control")
            return problem(413, "batch too large", str(error), request.url.path)
        if isinstance(error, TooManyOpenBatches):
            return problem(429, "too many open batches", str(error), request.url.path)
        return problem(422, "invalid batch", str(error), request.url.path)

    @app.exception_handler(ConfigurationError)
    async def _rules(request: Request, error: ConfigurationError) -> JSONResponse:
        return problem(422, "invalid rules", str(error), request.url.path)

    @app.exception_handler(LedgerUnavailable)
    async def _ledger(request: Request, error: LedgerUnavailable) -> JSONResponse:
        log.error("ledger unavailable: %s", error)
        return problem(503, "ledger unavailable", "the ledger cannot be reached; try again")

    @app.exception_handler(Exception)
    async def _fault(request: Request, error: Exception) -> JSONResponse:
        log.exception("fault serving %s %s", request.method, request.url.path)
        return problem(500, "internal error", "the gateway failed; its log says why")
