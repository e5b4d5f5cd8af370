"""Routes of approvals (docs/architecture.md, "The HTTP gateway"). Only approver
(and admin) keys answer, and the approver the ledger records is the key's
name: the bodies have no field for it, and an unknown field is a 422."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from runtime.gateway import access, roles
from runtime.gateway.auth import bearer
from runtime.gateway.keys import Key, Role
from runtime.gateway.problems import NotFound, Problem
from runtime.redaction import redact

log = logging.getLogger("toolrun.gateway")
router = APIRouter(tags=["approvals"])
Authorized = Annotated[Key, Depends(bearer)]


class Approval(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arguments: dict[str, Any] | None = Field(
        None, description="Updated arguments: validated and checked again before the call runs."
    )


class Denial(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(
        "denied by an approver",
        min_length=1,
        max_length=4000,
        description="Why: the model reads it.",
    )


@router.get("/v1/approvals")
def pending(
    request: Request, key: Authorized, batch: Annotated[str | None, Query(max_length=256)] = None
) -> dict[str, Any]:
    """Calls waiting for an answer that this key may see."""
    gateway = request.app.state.gateway
    rows = access.approvals(gateway, key, gateway.runtime.pending_approvals(batch))
    return {
        "approvals": [
            {
                "batch_id": row.batch_id,
                "call_id": row.call_id,
                "tool": row.tool,
                "arguments": redact(row.arguments),
                "reason": row.reason,
                "requested_at": row.requested_at.isoformat(),
                "expires_at": row.expires_at.isoformat(),
            }
            for row in rows
        ]
    }


@router.post("/v1/batches/{batch_id}/calls/{call_id}/approve")
def approve(
    batch_id: str,
    call_id: str,
    request: Request,
    key: Authorized,
    body: Annotated[Approval | None, Body()] = None,
) -> dict[str, Any]:
    """Let a waiting call run, and carry its batch on from here."""
    gateway = _answerable(request, key, batch_id, call_id)
    arguments = body.arguments if body else None
    if not gateway.runtime.approve(batch_id, call_id, by=key.name, updated_arguments=arguments):
        raise _not_waiting(call_id)
    log.info("call approved by key %s", key.name, extra={"batch_id": batch_id, "call_id": call_id})
    return {"batch_id": batch_id, "call_id": call_id, "answer": "approved", "by": key.name}


@router.post("/v1/batches/{batch_id}/calls/{call_id}/deny")
def deny(
    batch_id: str,
    call_id: str,
    request: Request,
    key: Authorized,
    body: Annotated[Denial | None, Body()] = None,
) -> dict[str, Any]:
    """Refuse a waiting call: it ends `denied` with the reason, for the model to read."""
    gateway = _answerable(request, key, batch_id, call_id)
    reason = (body or Denial()).reason
    if not gateway.runtime.deny(batch_id, call_id, reason, by=key.name):
        raise _not_waiting(call_id)
    log.info("call denied by key %s", key.name, extra={"batch_id": batch_id, "call_id": call_id})
    return {"batch_id": batch_id, "call_id": call_id, "answer": "denied", "by": key.name}


def _answerable(request: Request, key: Key, batch_id: str, call_id: str) -> Any:
    roles.require(key, Role.approver)
    gateway = request.app.state.gateway
    row = gateway.runtime.approvals.get(batch_id, call_id)
    if row is None or not access.approvals(gateway, key, [row]):
        raise NotFound(f"no approval for call {call_id!r} of batch {batch_id!r}")
    return gateway


def _not_waiting(call_id: str) -> Problem:
    return Problem(409, "not waiting", f"call {call_id} is no longer waiting (answered or expired)")
