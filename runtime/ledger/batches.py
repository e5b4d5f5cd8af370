"""What the ledger knows of a batch the cluster owns: its plan, its calls' ends
(the one authority on how each call ended), its cancel, and which batches the
sweep must look at (docs/architecture.md, "A batch the cluster owns").

Statements on a connection; callers reach them through `Ledger`'s methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Connection,
    String,
    and_,
    bindparam,
    cast,
    delete,
    exists,
    func,
    null,
    or_,
    select,
    union_all,
    update,
)

from runtime.ledger import chain
from runtime.ledger.prepared import Prepared
from runtime.ledger.tables import ApprovalRow, BatchRow, CallRow, EndRow, PlanRow, utc_now
from runtime.types import ToolResult

APPROVALS, BATCHES, CALLS, ENDS, PLANS = (
    ApprovalRow.__table__,
    BatchRow.__table__,
    CallRow.__table__,
    EndRow.__table__,
    PlanRow.__table__,
)


def ends(connection: Connection, batch_id: str) -> dict[str, ToolResult]:
    query = select(ENDS.c.call_id, ENDS.c.result).where(ENDS.c.batch_id == batch_id)
    rows = connection.execute(query).all()
    return {row.call_id: ToolResult.model_validate(row.result) for row in rows}


def plan(connection: Connection, batch_id: str) -> dict[str, Any] | None:
    return connection.execute(select(PLANS.c.body).where(PLANS.c.batch_id == batch_id)).scalar()


def claimed(connection: Connection, batch_id: str) -> dict[str, datetime]:
    query = select(CALLS.c.call_id, CALLS.c.started_at).where(
        CALLS.c.batch_id == batch_id, CALLS.c.status == "running"
    )
    return {row.call_id: row.started_at or utc_now() for row in connection.execute(query)}


@dataclass(frozen=True)
class Progress:
    """What moving a batch on reads of the ledger, read in one transaction
    (one snapshot): its plan (if asked for), its cancel, ends and claims."""

    plan: dict[str, Any] | None  # None: not asked for, or the batch has ended
    cancelled_at: datetime | None
    cancelled_by: str | None
    ends: dict[str, ToolResult]
    claimed: dict[str, datetime]
    recorded: bool  # the batch has a row


def progress(connection: Connection, batch_id: str, *, with_plan: bool) -> Progress:
    head = connection.execute(
        select(BATCHES.c.cancelled_at, BATCHES.c.cancelled_by).where(BATCHES.c.id == batch_id)
    ).first()
    return Progress(
        plan=plan(connection, batch_id) if with_plan else None,
        cancelled_at=head.cancelled_at if head else None,
        cancelled_by=head.cancelled_by if head else None,
        ends=ends(connection, batch_id),
        claimed=claimed(connection, batch_id),
        recorded=head is not None,
    )


@dataclass(frozen=True)
class Attention:
    """What the sweep looks at, read in one statement (docs/architecture.md,
    "The sweep"): an idle sweep costs one round trip to the ledger."""

    batches: list[str]  # open, and past their deadline, cancelled, or stale
    expired: list[tuple[str, str]]  # (batch id, call id) of pending approvals past their time


def needing_attention(
    connection: Connection, *, now: datetime, stale_before: datetime
) -> Attention:
    """Open batches past their deadline, cancelled, or created before
    `stale_before`; and pending approvals past their expiry."""
    everything = stale_before >= now  # after the state lost its data: every open batch
    found = {"now": now, "stale_before": stale_before, "everything": everything}
    rows = _ATTENTION.all(connection, found)
    return Attention(
        batches=[batch_id for batch_id, call_id in rows if call_id is None],
        expired=[(batch_id, call_id) for batch_id, call_id in rows if call_id is not None],
    )


# A stale batch is looked at for a message that may have been lost; one whose
# every open call waits for an answer to its approval has sent nothing that
# could be (an answer, or the approval's expiry, moves it on), so it is passed
# by: every sweep (once a second) read and viewed each of them, 5,000 in the
# bench's P10 (docs/architecture.md, "The sweep"). A batch with no
# open call is looked at still: the sweep marks it ended.
_UNANSWERED = exists().where(
    APPROVALS.c.batch_id == CALLS.c.batch_id,
    APPROVALS.c.call_id == CALLS.c.call_id,
    APPROVALS.c.status == "pending",
)
_ENDED_CALL = exists().where(ENDS.c.batch_id == CALLS.c.batch_id, ENDS.c.call_id == CALLS.c.call_id)
_OPEN_CALLS = exists().where(CALLS.c.batch_id == BATCHES.c.id, ~_ENDED_CALL)
_NOT_WAITING = exists().where(CALLS.c.batch_id == BATCHES.c.id, ~_ENDED_CALL, ~_UNANSWERED)
_ATTENTION = Prepared(  # built once: the sweep asks every second
    union_all(
        select(BATCHES.c.id, cast(null(), String).label("call_id")).where(
            BATCHES.c.ended_at.is_(None),
            or_(
                BATCHES.c.deadline_at <= bindparam("now", type_=BATCHES.c.deadline_at.type),
                BATCHES.c.cancelled_at.is_not(None),
                and_(
                    BATCHES.c.created_at
                    <= bindparam("stale_before", type_=BATCHES.c.created_at.type),
                    or_(bindparam("everything", type_=Boolean), ~_OPEN_CALLS, _NOT_WAITING),
                ),
            ),
            BATCHES.c.deadline_at.is_not(None),
        ),
        select(APPROVALS.c.batch_id, APPROVALS.c.call_id).where(
            APPROVALS.c.status == "pending",
            APPROVALS.c.expires_at <= bindparam("now", type_=APPROVALS.c.expires_at.type),
        ),
    ),
    rows=True,
)


def mark_ended(connection: Connection, batch_id: str) -> bool:
    """The batch ends at the time of its last end, once every call has one
    (an end written late from a buffer keeps the time it happened); its plan
    goes. Whether it is ended now."""
    key = {"batch": batch_id}
    if MARK_ENDED.execute(connection, key | {"now": utc_now()}) == 0:
        if ENDED.first(connection, key) is None:
            return False  # a call is open, or the batch is not recorded yet
    else:  # ended now: its rows are fixed from here (runtime/ledger/chain.py)
        chain.seal_ended(connection, batch_id)
    DROP_PLAN.execute(connection, key)
    return True


# Marking a batch ended, built once: the worker that ends a batch's last call
# runs them on every batch, and building them cost more than running them
# (docs/architecture.md, "Round trips and memory").
_LAST_END = select(func.max(ENDS.c.at)).where(ENDS.c.batch_id == bindparam("batch"))
_HAS_END = exists().where(ENDS.c.batch_id == CALLS.c.batch_id, ENDS.c.call_id == CALLS.c.call_id)
_OPEN_CALL = exists().where(CALLS.c.batch_id == bindparam("batch"), ~_HAS_END)
MARK_ENDED = Prepared(
    update(BATCHES)
    .where(BATCHES.c.id == bindparam("batch"), BATCHES.c.ended_at.is_(None), ~_OPEN_CALL)
    .values(
        ended_at=func.coalesce(
            _LAST_END.scalar_subquery(), bindparam("now", type_=BATCHES.c.ended_at.type)
        )
    )
)
ENDED = Prepared(
    select(BATCHES.c.id).where(BATCHES.c.id == bindparam("batch"), BATCHES.c.ended_at.is_not(None)),
    rows=True,
)
DROP_PLAN = Prepared(delete(PLANS).where(PLANS.c.batch_id == bindparam("batch")))


def mark_cancelled(connection: Connection, batch_id: str, *, by: str, at: datetime) -> datetime:
    connection.execute(
        update(BATCHES)
        .where(BATCHES.c.id == batch_id, BATCHES.c.cancelled_at.is_(None))
        .values(cancelled_at=at, cancelled_by=by)
    )
    found = select(BATCHES.c.cancelled_at).where(BATCHES.c.id == batch_id)
    return connection.execute(found).scalar() or at
