"""Routes of batches: submit, state (long poll), events (SSE), reply, cancel
(docs/architecture.md, "The HTTP gateway"). The shapes follow the Python
client: `Runtime.submit`/`submit_message`, `handle.stream()`, `handle.reply()`."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sse_starlette import EventSourceResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from runtime import adapters, transcript
from runtime.errors import KeyConflict
from runtime.gateway import access, events, problems, roles
from runtime.gateway.auth import bearer
from runtime.gateway.keys import Key, Role
from runtime.gateway.problems import Problem
from runtime.types import Mode

log = logging.getLogger("toolrun.gateway")
router = APIRouter(prefix="/v1/batches", tags=["batches"])
MAX_WAIT = 60.0  # seconds a long poll may hold a request
KEY_CHARS, TRACEPARENT_CHARS = 256, 128  # the headers' bounds (`shortcuts.py` checks them too)
Authorized = Annotated[Key, Depends(bearer)]


class Submission(BaseModel):
    """A toolrun batch (`calls`) or a provider message (`message`), with
    `Runtime.submit`'s options. The batch's key is the `Idempotency-Key` header."""

    model_config = ConfigDict(extra="forbid")
    calls: list[dict[str, Any]] | None = Field(None, description='[{"id", "name", "arguments"}]')
    message: dict[str, Any] | list[Any] | None = Field(
        None, description="An Anthropic, OpenAI chat or Responses message, as the provider sent it."
    )
    format: Literal["anthropic", "openai", "responses"] | None = None
    mode: Mode | None = None
    workspace: str | None = Field(None, max_length=4096)
    on_error: Literal["stop", "continue"] | None = None
    timeout: float | None = Field(None, gt=0, le=86400)
    rules: dict[Literal["allow", "ask", "deny"], list[str]] | None = None
    conversation: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="Batches of one conversation chain their transcripts, each to the one before.",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Submission:
        if (self.calls is None) == (self.message is None):
            raise ValueError("give exactly one of `calls` (a toolrun batch) or `message`")
        return self


@router.post(
    "",
    status_code=202,
    response_model=dict[str, Any],
    responses={
        200: {
            "description": "With `wait`: the batch ended; its state, as `GET` answers it.",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **problems.documented(401, 403, 409, 413, 422, 429),
    },
)
async def submit(
    submission: Submission,
    request: Request,
    key: Authorized,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=KEY_CHARS)] = None,
    traceparent: Annotated[str | None, Header(max_length=TRACEPARENT_CHARS)] = None,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT)] = 0,
) -> Response:
    """Start a batch and answer at once: 202, its `batch_id` and links. With
    `wait`, the answer is held until the batch ends or `wait` seconds pass,
    and is the body `GET /v1/batches/{id}` answers: 200 once it has ended,
    else 202 (`Location` names the batch to read on). The same
    `Idempotency-Key` again (from the same key) answers the same batch and
    runs nothing twice; with another body (calls, mode, workspace, on_error,
    rules) it is a 409. A W3C `traceparent` header puts the batch's spans in
    the caller's trace."""
    return await submitted(
        request.app.state.gateway, submission, key, idempotency_key, traceparent, wait
    )


async def submitted(
    gateway: Any,
    submission: Submission,
    key: Key,
    idempotency_key: str | None,
    traceparent: str | None,
    wait: float,
) -> Response:
    """`submit`'s answer, once its input is checked: FastAPI's route, or
    `shortcuts.Shortcuts` for a request it can check itself ("The HTTP gateway")."""
    # A wait's slot is taken before anything is submitted: a 429 past the
    # key's cap means no batch was started ("Flow control").
    release = gateway.waits.take(key) if wait > 0 else None
    try:
        # One hop to a worker thread and back: FastAPI checks the answer of a
        # plain `def` route in a second one ("The HTTP gateway").
        batch_id = await run_in_threadpool(
            _submit, gateway, submission, key, idempotency_key, traceparent
        )
        where = {"Location": f"/v1/batches/{batch_id}"}
        if release is None:
            return gateway.json({"batch_id": batch_id, **_links(batch_id)}, 202, where)
        seen = await _seen(gateway, key, batch_id)
        await events.settled(seen.handle, wait, _alive(gateway, key))
    finally:
        if release is not None:
            release()
    body = _state(batch_id, seen)
    return gateway.json(body, 200 if body["state"] == "ended" else 202, where)


def _submit(
    gateway: Any,
    submission: Submission,
    key: Key,
    idempotency_key: str | None,
    traceparent: str | None,
) -> str:
    """`submit`'s work off the event loop (the workspace's path is resolved,
    the batch recorded and sent): the batch's id."""
    roles.require(key, Role.submitter)
    options = {
        "mode": roles.mode_for(key, submission.mode),
        "workspace": roles.workspace_for(key, submission.workspace),
        "on_error": submission.on_error,
        "timeout": submission.timeout,
        "rules": submission.rules,
        # Keys are per gateway key, so two clients' keys never meet in one batch;
        # without one the batch is new, and nothing need be looked up for it.
        "key": f"gateway:{key.id}:{idempotency_key}" if idempotency_key else None,
        # Conversations too: one key's turns never chain to another key's batches.
        "conversation": submission.conversation and f"gateway:{key.id}:{submission.conversation}",
        "submitter": key.principal,
        "traceparent": traceparent,
        # Written in the batch's own transaction, not in one of its own while
        # its reads end ("The HTTP gateway"): `handle.owned` says if it was.
        "owner": {"key_id": key.id, "key_name": key.name},
    }
    roles.rules_for(key, submission.rules, gateway.org_allows)
    try:
        handle = gateway.handles.submit(
            submission.calls, submission.message, submission.format, **options
        )
    except KeyConflict as error:  # checked before anything of this request was written
        used = (
            f"Idempotency-Key {idempotency_key!r} was used"
            if idempotency_key
            else "this key sent this provider turn before"  # its turn key, this key's own
        )
        raise Problem(
            409,
            "idempotency key reused",
            f"{used} for a batch of other {error.differs}; send another Idempotency-Key",
        ) from None
    gateway.keys.own(
        handle.batch_id,
        key_id=key.id,
        key_name=key.name,
        format=handle.format,
        written=handle.owned,
    )
    gateway.metrics.batches.inc()
    log.info(
        "batch submitted by key %s: %d calls in %s mode",
        key.name,
        len(handle.batch.calls),
        options["mode"].value,
        extra={"batch_id": handle.batch_id, "call_id": None},
    )
    return handle.batch_id


@router.get("/{batch_id}", response_model=dict[str, Any])
async def state(
    batch_id: str,
    request: Request,
    key: Authorized,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT)] = 0,
) -> Response:
    """The batch's results so far; with `wait`, held until it ends or `wait` seconds pass."""
    return await polled(request.app.state.gateway, key, batch_id, wait)


async def polled(gateway: Any, key: Key, batch_id: str, wait: float) -> Response:
    """`state`'s answer, once its input is checked (as `submitted`)."""
    seen = await _seen(gateway, key, batch_id)
    with gateway.waits.holding(key, wait):
        await events.settled(seen.handle, wait, _alive(gateway, key))
    # Built here, not by FastAPI from a returned dict: it would check and
    # convert the body once more before the response class renders it.
    return gateway.json(_state(batch_id, seen))


def _state(batch_id: str, seen: access.Seen) -> dict[str, Any]:
    """The batch's state as `GET /v1/batches/{id}` answers it."""
    finals, waiting = seen.handle.so_far()
    batch = seen.handle.batch
    return {
        "batch_id": batch_id,
        "state": "ended" if seen.handle.done else "running",
        "mode": batch.mode.value,
        "workspace": batch.workspace,
        "calls": [call.id for call in batch.calls],
        # Redacted once, on the way out, by the deployment's redactor (`RedactedJSON`:
        # the built-in detectors and its own patterns), not by the built-in first.
        "results": [result.model_dump(mode="json") for result in finals],
        "awaiting_approval": [notice.model_dump(mode="json") for notice in waiting],
        "submitted_by": seen.owner.key_name if seen.owner else None,
        # Summed from these results: no ledger read ("Round trips and memory").
        "usage": seen.handle.tally(finals),
    }


@router.get(
    "/{batch_id}/events",
    response_class=EventSourceResponse,  # not the JSON the document would say otherwise
    responses={
        200: {
            "description": "Server-sent events: `result`, `notice`, then `end`.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    },
)
async def stream(
    batch_id: str,
    request: Request,
    key: Authorized,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """One event per result as it ends (`result`), a `notice` for a call that
    waits for approval, then `end`. Reconnect with `Last-Event-ID` to resume."""
    gateway = request.app.state.gateway
    sent = gateway.cursors.parse(last_event_id)
    seen = await _seen(gateway, key, batch_id)
    release = gateway.waits.take(key)  # a 429 past the key's cap, before the stream starts

    async def counted():
        gateway.metrics.streams.inc()
        try:
            async for event in events.stream(
                seen.handle,
                sent,
                on_event=gateway.metrics.events.inc,
                alive=_alive(gateway, key),
                cursors=gateway.cursors,
            ):
                yield event
        finally:
            gateway.metrics.streams.dec()
            release()

    # A stream that never started (its client gone at once) is released after the response.
    return EventSourceResponse(
        counted(), ping=15, sep="\n", background=BackgroundTask(release)
    )  # plain LF: the simplest parsers cope  # plain LF: the simplest parsers cope


@router.get("/{batch_id}/reply")
async def reply(
    batch_id: str,
    request: Request,
    key: Authorized,
    format: Literal["anthropic", "openai", "responses"] | None = None,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT)] = 0,
) -> Any:
    """What to send the model next, in the message's dialect (or `format`),
    once every call has ended (409 before; `wait` holds the request)."""
    gateway = request.app.state.gateway
    seen = await _seen(gateway, key, batch_id)
    with gateway.waits.holding(key, wait):
        await events.settled(seen.handle, wait, _alive(gateway, key))
    if not seen.handle.done:
        raise Problem(
            409,
            "batch still running",
            f"batch {batch_id} has calls still open; read its events or wait",
        )
    dialect = format or (seen.owner.format if seen.owner else None) or seen.handle.format
    if dialect is None:
        raise Problem(
            422,
            "format required",
            "this batch was a toolrun batch: give ?format=anthropic|openai|responses",
        )
    return adapters.reply(dialect, seen.handle.results(), seen.handle.kinds)


@router.get("/{batch_id}/transcript")
def transcript_of(
    batch_id: str,
    request: Request,
    key: Authorized,
    format: Literal["json", "jsonl", "md", "html"] = "json",
) -> Response:
    """The batch's transcript from the ledger (docs/schemas/transcript-1.json),
    sealed with a digest and an HMAC under the deployment's signing key."""
    gateway = request.app.state.gateway
    access.owner(gateway, key, batch_id)
    runtime = gateway.runtime
    document = transcript.build(runtime.ledger, batch_id)
    if document is None:
        raise Problem(404, "not found", f"no batch {batch_id!r}")
    rows = runtime.ledger.rows_check(batch_id, runtime.services.key)  # against the end's seal
    text = transcript.render(transcript.seal(document, runtime.services.key, rows), format)
    return Response(text, media_type=transcript.MEDIA_TYPES[format])


@router.post("/{batch_id}/cancel", status_code=202)
def cancel(batch_id: str, request: Request, key: Authorized) -> dict[str, Any]:
    """Cancel the batch; its events end it call by call, as `handle.cancel()` does."""
    roles.require(key, Role.submitter)
    gateway = request.app.state.gateway
    access.batch(gateway, key, batch_id)
    gateway.runtime.cancel(batch_id, by=key.name)
    log.info("batch cancelled by key %s", key.name, extra={"batch_id": batch_id, "call_id": None})
    return {"batch_id": batch_id, "cancelled_by": key.name}


async def _seen(gateway: Any, key: Key, batch_id: str) -> access.Seen:
    """The batch `key` may see: from what this process holds, else read off the loop."""
    held = access.held(gateway, key, batch_id)
    return held or await run_in_threadpool(access.batch, gateway, key, batch_id)


def _alive(gateway: Any, key: Key) -> events.Alive:
    """Whether `key` is still live, for a request that stays open."""
    return lambda: gateway.standing.still_live(key.id)


def _links(batch_id: str) -> dict[str, str]:
    base = f"/v1/batches/{batch_id}"
    return {
        "state": base,
        "events": f"{base}/events",
        "reply": f"{base}/reply",
        "cancel": f"{base}/cancel",
        "transcript": f"{base}/transcript",
    }
