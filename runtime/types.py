"""Wire types: what an orchestrator sends (calls, batches) and gets back (results).

Everything here is JSON-serializable with pydantic; statuses and risks are `str`
enums so they are stored and sent as plain strings.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Risk(StrEnum):
    """What running a tool can do to the world. Only `read` runs in parallel."""

    read = "read"
    write = "write"
    external = "external"
    destructive = "destructive"
    unknown = "unknown"


class Mode(StrEnum):
    """Permission mode of a batch (docs/architecture.md, "Semantics")."""

    plan = "plan"
    default = "default"
    accept_edits = "accept_edits"
    auto = "auto"
    bypass = "bypass"


class Status(StrEnum):
    """How a call ended. Every early end of the pipeline has its own status."""

    ok = "ok"
    error = "error"
    unknown_tool = "unknown_tool"
    invalid_arguments = "invalid_arguments"
    disabled = "disabled"
    denied = "denied"
    # Not an end: the wire's and the ledger's word for a call waiting for a
    # human. A handle turns it into an `ApprovalRequested`; no result has it.
    awaiting_approval = "awaiting_approval"
    skipped = "skipped"
    timeout = "timeout"
    cancelled = "cancelled"
    outcome_unknown = "outcome_unknown"
    # A budget of the policy's `limits.budget` would be passed: the call did not
    # run (docs/architecture.md, "Usage and budgets").
    over_budget = "over_budget"
    # A rate limit or concurrency cap of the policy's `limits` whose
    # `on_limit` is "refuse": the call did not run; its content says when to
    # try again (docs/architecture.md, "Flow control").
    rate_limited = "rate_limited"
    concurrency_limited = "concurrency_limited"


OnError = Literal["stop", "continue"]
"""Whether a batch's later ordered steps still run after one fails: "stop"
(they end skipped) or "continue"."""


class ToolCall(BaseModel):
    """One tool call as the model emitted it. `arguments` is kept raw on purpose:
    a model may send a string, a list or null, and that must become a result,
    not a rejected batch."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: Any = Field(default_factory=dict)
    # The provider's kind of call. toolrun runs `function` calls; any other kind
    # (an OpenAI custom tool, a Responses shell call...) still gets its one
    # result, an error saying why it was not run, so the conversation stays valid.
    kind: str = "function"


class Batch(BaseModel):
    """The tool calls of one model turn, with the policy they run under.
    The policy is fixed when the batch is submitted."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=lambda: uuid4().hex)
    calls: list[ToolCall]
    mode: Mode = Mode.default
    workspace: str = "."
    on_error: OnError = "stop"


class ErrorInfo(BaseModel):
    """The cause of a non-ok result, as text: a kind (a status or an exception
    type name) and a message."""

    kind: str
    message: str


class Media(BaseModel):
    """An image or a document a tool returned, carried beside the text so that
    replies can give it to the model as a provider content block. Its bytes
    (base64) never go into `content`, and it is sent whole or not at all."""

    kind: Literal["image", "document"]
    mime_type: str
    data: str  # base64
    name: str | None = None

    @property
    def size(self) -> int:
        """Decoded bytes."""
        return len(self.data) * 3 // 4 - self.data[-2:].count("=")


class Usage(BaseModel):
    """What one call cost (docs/architecture.md, "Usage and budgets"): measured
    on the worker around the tool (wall and CPU time, children included), the
    queue wait before it, what the tool said it spent, and its price by the
    org policy's price table. None where not measured or not priced."""

    wall_ms: float | None = None
    cpu_ms: float | None = None
    queue_ms: float | None = None
    approval_ms: float | None = None
    reported: dict[str, float] = Field(default_factory=dict)  # the tool's own (`ToolOutput.spent`)
    price_per_call: float | None = None
    price_per_second: float | None = None
    cost: float | None = None  # per call + per worker-second × wall seconds

    @property
    def worker_seconds(self) -> float:
        """The call's run time on a worker in seconds (`wall_ms`; 0 if unknown)."""
        return (self.wall_ms or 0.0) / 1000


class ToolResult(BaseModel):
    """The one normalized result every call gets, whatever happened to it."""

    call_id: str
    tool: str
    status: Status
    model_message: str
    summary: str
    content: Any = None
    media: list[Media] = Field(default_factory=list)
    error: ErrorInfo | None = None
    duration_ms: float = 0.0
    # The attempt that ended the call, when a worker ran its tool: milliseconds
    # from the message's posting to the tool's start, and of CPU time (the
    # tool's, and its children's it waited for). None when not measured.
    queue_wait_ms: float | None = None
    cpu_ms: float | None = None
    worker: str | None = None
    attempts: int = 0
    usage: Usage | None = None  # set when a worker ran the tool

    @property
    def ok(self) -> bool:
        """Whether the call succeeded (`status` is `ok`)."""
        return self.status is Status.ok


class ApprovalRequested(BaseModel):
    """A call waits for a human's answer (`Runtime.approve` or `deny`): a
    notice that its final result follows, never a result itself. A handle's
    stream yields it; `results()` never holds it."""

    call_id: str
    tool: str
    reason: str


Event = ToolResult | ApprovalRequested  # what a handle's stream yields


class CallMessage(BaseModel):
    """What the client sends a worker for one admitted call: the call, the
    batch policy it was admitted under and the decision, signed (HMAC) so the
    worker can check it again and refuse anything a client did not send."""

    batch_id: str
    call_id: str
    tool: str
    arguments: Any
    mode: Mode
    workspace: str
    position: int
    policy: dict[str, Any]
    decision: dict[str, str]
    approved_by: str | None = None
    on_error: OnError = "stop"  # whether a chain goes on past this step if it fails
    reply_to: str | None = None  # the client's results channel (else the batch's)
    stage: int | None = None  # the batch's stage this call belongs to,
    stage_size: int = 1  # how many calls it holds,
    last_stage: bool = False  # and whether it is the batch's last
    then: list[CallMessage] = Field(default_factory=list)  # the chain's next steps, each signed
    # The W3C trace context the batch was submitted under (runtime/tracing.py);
    # signed like the rest, and left out of the signature while None.
    traceparent: str | None = None
    # How long an approved call waited for its answer (ms): part of its usage,
    # signed like the rest, and left out of the signature while None.
    approval_ms: float | None = None
    # When the queue posted it (epoch seconds): set at each posting, a chain's
    # next step's when it is handed on; outside the signature, as `then` is.
    sent_at: float | None = None
    signature: str | None = None

    def wire(self) -> dict[str, Any]:
        """The message as the broker carries it (JSON-ready)."""
        return self.model_dump(mode="json")

    @staticmethod
    def tool_of(raw: Any) -> str | None:
        """The tool a delivered message names, without decoding the rest: the
        worker's main process needs only that, to set the hard time limit."""
        tool = raw.get("tool") if isinstance(raw, dict) else None
        return tool if isinstance(tool, str) else None

    @staticmethod
    def call_of(raw: Any) -> tuple[str, str] | None:
        """(batch id, call id) of a delivered message, without decoding the
        rest: the worker's main process renews the leases of running calls."""
        if not isinstance(raw, dict):
            return None
        batch_id, call_id = raw.get("batch_id"), raw.get("call_id")
        if isinstance(batch_id, str) and isinstance(call_id, str):
            return batch_id, call_id
        return None

    @classmethod
    def from_wire(cls, raw: Any) -> CallMessage | None:
        """The message a broker delivered, or None if it is too malformed to
        name a call (nobody to answer)."""
        try:
            return cls.model_validate(raw)
        except ValidationError:
            return None
