"""What the ledger knows of a batch the cluster owns: its plan, its calls' ends
(the one authority on how each call ended), its key, its cancel, and which
batches the sweep must look at (docs/architecture.md, "A batch the cluster owns")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, or_, select, update

from runtime.ledger.store import Ledger
from runtime.ledger.tables import BatchRow, CallRow, EndRow, PlanRow, utc_now
from runtime.types import ToolResult

BATCHES, CALLS, ENDS, PLANS = (BatchRow.__table__, CallRow.__table__, EndRow.__table__,
                               PlanRow.__table__)  # fmt: skip


def ends(ledger: Ledger, batch_id: str) -> dict[str, ToolResult]:
    query = select(ENDS.c.call_id, ENDS.c.result).where(ENDS.c.batch_id == batch_id)
    rows = ledger.transaction(lambda c: c.execute(query).all(), write=False, core=True)
    return {row.call_id: ToolResult.model_validate(row.result) for row in rows}


def plan(ledger: Ledger, batch_id: str) -> dict[str, Any] | None:
    query = select(PLANS.c.body).where(PLANS.c.batch_id == batch_id)
    return ledger.transaction(lambda c: c.execute(query).scalar(), write=False, core=True)


def claimed(ledger: Ledger, batch_id: str) -> set[str]:
    """Calls a worker has claimed or started (a side effect claims before it runs)."""
    query = select(CALLS.c.call_id).where(CALLS.c.batch_id == batch_id,
                                          CALLS.c.status == "running")  # fmt: skip
    return set(ledger.transaction(lambda c: c.execute(query).scalars().all(), write=False,
                                  core=True))  # fmt: skip


def by_key(ledger: Ledger, key: str) -> BatchRow | None:
    query = select(BATCHES).where(BATCHES.c.key == key)
    return ledger.transaction(lambda c: c.execute(query).first(), write=False, core=True)


def needing_attention(ledger: Ledger, *, now: datetime, stale_before: datetime) -> list[str]:
    """Open batches past their deadline, cancelled, or old enough that a lost
    message or a lost hand-on could be holding them up."""
    query = select(BATCHES.c.id).where(
        BATCHES.c.ended_at.is_(None),
        or_(BATCHES.c.deadline_at <= now, BATCHES.c.cancelled_at.is_not(None),
            BATCHES.c.created_at <= stale_before),
        BATCHES.c.deadline_at.is_not(None),
    )  # fmt: skip
    return list(ledger.transaction(lambda c: c.execute(query).scalars().all(), write=False,
                                   core=True))  # fmt: skip


def mark_ended(ledger: Ledger, batch_id: str) -> None:
    """Every call has ended: the sweep passes it by, and its plan (unredacted
    arguments) is deleted."""

    def work(connection) -> None:
        connection.execute(update(BATCHES).where(BATCHES.c.id == batch_id,
                                                 BATCHES.c.ended_at.is_(None))
                           .values(ended_at=utc_now()))  # fmt: skip
        connection.execute(delete(PLANS).where(PLANS.c.batch_id == batch_id))

    ledger.transaction(work, core=True)


def mark_cancelled(ledger: Ledger, batch_id: str, *, by: str) -> datetime:
    """When the batch was cancelled (the first cancel counts)."""
    now = utc_now()

    def work(connection) -> datetime:
        connection.execute(update(BATCHES).where(BATCHES.c.id == batch_id,
                                                 BATCHES.c.cancelled_at.is_(None))
                           .values(cancelled_at=now, cancelled_by=by))  # fmt: skip
        found = select(BATCHES.c.cancelled_at).where(BATCHES.c.id == batch_id)
        return connection.execute(found).scalar() or now

    return ledger.transaction(work, core=True)
