"""`GET /v1/usage`: what calls cost, rolled up from the ledger
(docs/architecture.md, "Usage and budgets"). An admin key sees every
submitter's; any other key its own batches' only."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool

from runtime.gateway.auth import bearer
from runtime.gateway.keys import Key, Role
from runtime.gateway.problems import Forbidden, Problem
from runtime.usage import spans

router = APIRouter(tags=["usage"])
Authorized = Annotated[Key, Depends(bearer)]


@router.get("/v1/usage")
async def usage(
    request: Request,
    key: Authorized,
    by: Literal["key", "tool", "workspace", "day", "batch", "status"] = "key",
    since: Annotated[str | None, Query(max_length=50)] = None,
    submitter: Annotated[str | None, Query(max_length=300)] = None,
) -> dict[str, Any]:
    """Usage rolled up `by` one of key, tool, workspace, day, batch, status;
    `since`: only calls ended since (`7d`, `12h`, `30m`, `2w`, an ISO date); `submitter`
    (admin keys): only that submitter's (`key:NAME` or a principal)."""
    own = key.principal
    if key.role is not Role.admin:
        if submitter not in (None, own):
            raise Forbidden("a key sees its own usage only; leave out submitter")
        submitter = own
    try:
        start = spans.since(since) if since is not None else None
    except ValueError as error:
        raise Problem(422, "invalid since", str(error)) from None
    ledger = request.app.state.gateway.runtime.ledger
    rows = await run_in_threadpool(ledger.usage, by, since=start, submitter=submitter)
    return {"by": by, "since": start.isoformat() if start else None, "rows": rows}
