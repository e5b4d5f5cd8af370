"""Routes of approvals (docs/architecture.md, "The HTTP gateway"). Only approver
(and admin) keys answer, and the approver the ledger records is the key's
name: the bodies have no field for it, and an unknown field is a 422."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from runtime.gate.remembering import BeyondRole, RememberRefused
from runtime.gateway import access, roles
from runtime.gateway.auth import bearer
from runtime.gateway.keys import Key, Role
from runtime.gateway.problems import Forbidden, NotFound, Problem
from runtime.redaction import redact

log = logging.getLogger("toolrun.gateway")
router = APIRouter(tags=["approvals"])
Authorized = Annotated[Key, Depends(bearer)]


class Approval(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arguments: dict[str, Any] | None = Field(
        None, description="Updated arguments: validated and checked again before the call runs."
    )
    remember: Literal["workspace", "submitter"] | None = Field(
        None,
        description="And allow calls like it from now on, for the batch's workspace or submitter.",
    )
    rule: str | None = Field(
        None,
        max_length=1000,
        description="With remember: the allow rule (an admin's may be wider than the call).",
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
    if body is not None and body.remember is not None:
        return _remembering(gateway, key, batch_id, call_id, body)
    if body is not None and body.rule is not None:
        raise Problem(422, "rule without remember", "a rule is remembered only with `remember`")
    if not gateway.runtime.approve(batch_id, call_id, by=key.name, updated_arguments=arguments):
        raise _not_waiting(call_id)
    log.info("call approved by key %s", key.name, extra={"batch_id": batch_id, "call_id": call_id})
    return {"batch_id": batch_id, "call_id": call_id, "answer": "approved", "by": key.name}


def _remembering(gateway: Any, key: Key, batch_id: str, call_id: str, body: Approval) -> dict:
    """Approve and remember, within what the key's role may grant
    (docs/architecture.md, "Remembered rules"): an admin any rule that covers
    the call; an approver the narrowest rule only, and for the batch's
    submitter only if the key is not confined to workspace roots."""
    admin = key.role is Role.admin
    if body.remember == "submitter" and not admin and key.roots is not None:
        raise Forbidden(
            f"key {key.name!r} is confined to workspace roots: it may remember for a workspace only"
        )
    try:
        row = gateway.runtime.remember(
            batch_id,
            call_id,
            scope=body.remember,
            by=key.name,
            rule=body.rule,
            may_widen=admin,
            updated_arguments=body.arguments,
        )
    except BeyondRole as error:
        raise Forbidden(str(error)) from None
    except RememberRefused as error:
        raise Problem(422, "cannot remember", str(error)) from None
    if row is None:
        raise _not_waiting(call_id)
    log.info("call approved by key %s", key.name, extra={"batch_id": batch_id, "call_id": call_id})
    remembered = {"id": row.id, "rule": row.rule, "scope": row.scope, "for": row.scope_value}
    answer = {"batch_id": batch_id, "call_id": call_id, "answer": "approved", "by": key.name}
    return {**answer, "remembered": remembered}


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
    row = gateway.runtime.deployment.approvals.get(batch_id, call_id)
    if row is None or not access.approvals(gateway, key, [row]):
        raise NotFound(f"no approval for call {call_id!r} of batch {batch_id!r}")
    return gateway


def _not_waiting(call_id: str) -> Problem:
    return Problem(409, "not waiting", f"call {call_id} is no longer waiting (answered or expired)")
