"""A call the gate holds for a person, asked of the person at the MCP client
(docs/architecture.md, "Integrations"): an MCP elicitation whose `accept`
approves the toolrun call and whose `decline` denies it; a `cancel` leaves it
waiting. On a connection with a back-channel (the handshake protocol versions)
the server sends `elicitation/create` and waits; on 2026-07-28, which has
none, the `tools/call` answers `InputRequiredResult` and the client retries it
with the person's answer and the sealed request state naming the call. Also
what a call's progress notifications say. Needs the `mcp` extra."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from runtime.integrations.batches import Outcome
from runtime.types import ApprovalRequested, Event, ToolResult

ASKED = "toolrun/approval"  # the input request's key in an `InputRequiredResult`
# An empty form: the person's answer is the action itself (accept or decline).
FORM: dict[str, Any] = {"type": "object", "properties": {}}
DECLINED = "declined by a person in the MCP client"


def supported(ctx: Any) -> bool:
    """Whether the client declared it can show a form elicitation."""
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


def question(outcome: Outcome, call_id: str, arguments: Any) -> types.ElicitRequestFormParams:
    notice = outcome.waiting[call_id]
    message = (
        f"Run {notice.tool} with {arguments}? toolrun asks a person first ({notice.reason}). "
        f"Accept to approve it, decline to refuse it (batch {outcome.batch_id})."
    )
    return types.ElicitRequestFormParams(message=message, requested_schema=FORM)


def input_required(asked: types.ElicitRequestFormParams, batch_id: str, call_id: str):
    """The 2026-07-28 way to ask: the client asks the person and retries the
    call with the answer and this state (sealed by `boundary`)."""
    return types.InputRequiredResult(
        input_requests={ASKED: types.ElicitRequest(params=asked)},
        request_state=f"{batch_id} {call_id}",
    )


def retried(params: types.CallToolRequestParams) -> tuple[str, str, Any] | None:
    """A retried call's batch, call and the person's answer, if it is one."""
    if not params.request_state:
        return None
    batch_id, _, call_id = params.request_state.partition(" ")
    return batch_id, call_id, (params.input_responses or {}).get(ASKED)


def boundary(principal: Any = None) -> RequestStateBoundary:
    """Request state sealed under this process's key, bound to the request (and
    to `principal(ctx)`, the HTTP face's key): a client can neither forge nor
    move it to approve another call."""
    security = RequestStateSecurity.ephemeral(audience="toolrun")
    security.bind_principal = principal
    return RequestStateBoundary(security, default_audience="toolrun")


class Progress:
    """A `tools/call`'s `notifications/progress` (sent only when the client gave
    a progress token): submitted, waiting for a person, answered, ended. The
    values only grow, as MCP requires; toolrun's stream has no start event."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.last: float | None = None

    async def step(self, progress: float, message: str) -> None:
        if self.last is not None and progress <= self.last:
            return
        self.last = progress
        await self.session.report_progress(progress, 1.0, message)

    async def seen(self, event: Event) -> None:
        if isinstance(event, ApprovalRequested):
            await self.step(0.25, f"{event.tool} waits for a person's approval: {event.reason}")
        elif isinstance(event, ToolResult):
            await self.step(1.0, f"{event.tool} ended {event.status.value}")
