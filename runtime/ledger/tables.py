"""The ledger's tables: one row per batch, per call and per decision or transition.

Statuses and kinds are stored as plain strings, JSON columns hold what the
ledger has already made JSON-shaped and redacted, and every time is aware and
in UTC on every backend. Writing and reading them is `runtime.ledger.store`'s job.
"""

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, DateTime, TypeDecorator
from sqlmodel import Field, SQLModel

from runtime import clock


class EventKind(StrEnum):
    """What an event row records (docs/architecture.md, "Semantics")."""

    lookup_failed = "lookup_failed"
    invalid_arguments = "invalid_arguments"
    disabled = "disabled"
    decision = "decision"
    approval_asked = "approval_asked"
    approval_given = "approval_given"
    approval_refused = "approval_refused"
    approval_notified = "approval_notified"  # a notifier told (runtime/batch/notifying.py)
    hook = "hook"  # a policy hook's answer, latency or failure (runtime/gate/hooks/)
    started = "started"
    retried = "retried"
    finished = "finished"
    skipped = "skipped"
    cancelled = "cancelled"


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes on every backend: SQLite keeps no offset, so UTC is
    put back on read. A naive value is taken to be UTC already."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        return value.astimezone(UTC) if value and value.tzinfo else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utc_now() -> datetime:
    return clock.utc()  # the state's clock: "One clock"


def _json_column() -> Any:
    return Field(default=None, sa_column=Column(JSON(none_as_null=True)))


class BatchRow(SQLModel, table=True):
    __tablename__ = "toolrun_batch"

    id: str = Field(primary_key=True)
    mode: str
    workspace: str
    on_error: str
    call_count: int
    policy_version: str | None = None
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    # The batch belongs to the cluster (docs/architecture.md, "A batch the cluster owns"):
    key: str | None = Field(default=None, unique=True, index=True)  # for idempotent submits
    fingerprint: str | None = None  # a hash of what decides what runs ("Attach and keys")
    deadline_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    cancelled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    cancelled_by: str | None = None
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime, index=True)
    # What its transcript tells beyond the rows above (docs/architecture.md, "Transcripts"):
    # A gateway key ("key:<name>") or the submitting principal; indexed for
    # `toolrun usage --key` on a grown ledger (docs/benchmarks, P8).
    submitter: str | None = Field(default=None, index=True)
    format: str | None = None  # the provider dialect of a submitted message: its reply's
    policy_files: Any = _json_column()  # the files (or submit) the batch's rules came from
    stages: Any = _json_column()  # the plan's stages: [{"parallel": bool, "calls": [ids]}]
    conversation: str | None = Field(default=None, index=True)
    # The turn before this one in its conversation, when this one was submitted,
    # and that turn's transcript digest (None if it had not ended then).
    previous_batch: str | None = None
    previous_digest: str | None = None
    # The model's tokens of the turn, from a provider response's `usage` given to
    # `submit_message` (docs/architecture.md, "Usage and budgets").
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    # Signed when the batch ends, over each call's row hashes (runtime/ledger/chain.py).
    seal: Any = _json_column()


class CallRow(SQLModel, table=True):
    """Where a call stands now; its events say how it got there."""

    __tablename__ = "toolrun_call"

    batch_id: str = Field(primary_key=True)
    call_id: str = Field(primary_key=True)
    position: int
    tool: str
    kind: str | None = None  # the provider's kind of call (ToolCall.kind), for the reply
    risk: str | None = None
    status: str = "pending"
    arguments: Any = _json_column()
    summary: str | None = None
    error_kind: str | None = None
    error_message: str | None = None
    duration_ms: float | None = None
    worker: str | None = None
    attempts: int = 0
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class EventRow(SQLModel, table=True):
    """One decision or transition; never updated, never deleted."""

    __tablename__ = "toolrun_event"

    id: int | None = Field(default=None, primary_key=True)
    batch_id: str = Field(index=True)
    call_id: str | None = None
    kind: str
    at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    mode: str | None = None
    risk: str | None = None
    effect: str | None = None
    rule: str | None = None
    source: str | None = None  # the settings file (or submit, mode, approval) behind `rule`
    reason: str | None = None
    policy_version: str | None = None
    approver: str | None = None
    worker: str | None = None
    attempt: int | None = None
    status: str | None = None
    detail: Any = _json_column()
    chain: str | None = None  # the row's hash as written (runtime/ledger/chain.py)


class ApprovalRow(SQLModel, table=True):
    """A call waiting for a human, stored so that any process holding the batch
    id can answer it and a restarted client still finds it."""

    __tablename__ = "toolrun_approval"

    batch_id: str = Field(primary_key=True)
    call_id: str = Field(primary_key=True)
    tool: str
    arguments: Any = _json_column()  # redacted: what the approver is shown
    reason: str
    status: str = Field(default="pending", index=True)  # pending, approved, denied, expired
    requested_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    answered_by: str | None = None
    answered_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    answer: str | None = None
    updated_arguments: bool = False
    # The arguments the approver gave, as given (the call runs with them), and an
    # HMAC over the answer and them: a row changed by anyone without the key fails closed.
    arguments_given: Any = _json_column()
    seal: str | None = None


class EndRow(SQLModel, table=True):
    """A call's end, once: the compare-and-set of every reporter (a worker, the
    deadline sweep, a cancel, an approver). Whoever inserts it first ended the
    call; everyone else reads this row back. `result` is the redacted
    `ToolResult` the model gets, so every client streams this very end."""

    __tablename__ = "toolrun_end"

    batch_id: str = Field(primary_key=True)
    call_id: str = Field(primary_key=True)
    status: str
    result: Any = _json_column()
    at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    chain: str | None = None  # the row's hash as written (runtime/ledger/chain.py)


class PlanRow(SQLModel, table=True):
    """What a batch still needs to move on without its client: its stages and
    each call's signed task message. Work, not audit: the arguments in it are
    not redacted (a worker needs them as the model wrote them), and the row is
    deleted once the batch has ended."""

    __tablename__ = "toolrun_plan"

    batch_id: str = Field(primary_key=True)
    body: Any = _json_column()


class ApiKeyRow(SQLModel, table=True):
    """A key of the HTTP gateway (docs/architecture.md, "The HTTP gateway").
    Only a SHA-256 of the secret is kept: the secret is shown once, at creation,
    and is long and random enough that a slow hash would add nothing."""

    __tablename__ = "toolrun_api_key"

    id: str = Field(primary_key=True)  # the public part of the token, which finds the row
    name: str = Field(unique=True, index=True)  # recorded as the approver, the canceller
    role: str  # submitter, approver, admin
    secret_hash: str
    workspace_roots: Any = _json_column()  # list of directories; None: no confinement (admin)
    max_mode: str | None = None  # the most permissive mode a submitter may ask for
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class BatchOwnerRow(SQLModel, table=True):
    """Which gateway key submitted a batch: a key sees only its own batches."""

    __tablename__ = "toolrun_batch_owner"

    batch_id: str = Field(primary_key=True)
    key_id: str = Field(index=True)
    key_name: str
    format: str | None = None  # the provider dialect of a submitted message, for its reply
    at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)


class UsageRow(SQLModel, table=True):
    """What one call cost, written with its end (docs/architecture.md, "Usage
    and budgets"): every call has one, those no worker ran with no figures.
    Rolled up per batch, submitter, tool, workspace and day with `toolrun_batch`."""

    __tablename__ = "toolrun_usage"

    batch_id: str = Field(primary_key=True)
    call_id: str = Field(primary_key=True)
    tool: str = Field(index=True)
    status: str
    at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime, index=True)
    wall_ms: float | None = None  # on the worker: worker-seconds are these
    cpu_ms: float | None = None  # the tool's process and its children
    queue_ms: float | None = None
    approval_ms: float | None = None
    cost: float | None = None  # by the price table the batch was submitted under
    reported: Any = _json_column()  # what the tool said it spent ({"usd": 0.01})


class RememberedRuleRow(SQLModel, table=True):
    """An allow rule a person added while answering an approval ("approve and
    remember", docs/architecture.md, "Remembered rules"): the gate applies it to
    later batches of its workspace or submitter until it is revoked."""

    __tablename__ = "toolrun_remembered_rule"

    id: int | None = Field(default=None, primary_key=True)
    rule: str  # `Tool` or `Tool(specifier)`, always an allow rule
    scope: str  # workspace or submitter
    scope_value: str = Field(index=True)  # the resolved workspace, or the submitter
    added_by: str
    added_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime)
    batch_id: str  # the answered call it came from
    call_id: str
    revoked_by: str | None = None
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class ConversationRow(SQLModel, table=True):
    """A conversation's last sealed turn and how many turns it had then,
    signed (runtime/ledger/turn_seal.py): a last turn removed from the ledger
    leaves its conversation's head naming it."""

    __tablename__ = "toolrun_conversation"

    id: str = Field(primary_key=True)
    turns: int
    last_batch: str
    seal: str


TABLES = [
    BatchRow.__table__,
    CallRow.__table__,
    EventRow.__table__,
    ApprovalRow.__table__,
    EndRow.__table__,
    PlanRow.__table__,
    ApiKeyRow.__table__,
    BatchOwnerRow.__table__,
    UsageRow.__table__,
    RememberedRuleRow.__table__,
    ConversationRow.__table__,
]
# The event columns a caller may set that are stored as (redacted) text.
EVENT_TEXT = {
    "mode",
    "risk",
    "effect",
    "rule",
    "source",
    "reason",
    "policy_version",
    "approver",
    "worker",
    "status",
}
