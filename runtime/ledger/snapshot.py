"""A batch's whole record in one read transaction, a `BatchSnapshot`: its row,
its calls, its events in order, its approvals and its ends, as one consistent
snapshot (a call's end and its call row never disagree within it). What a
transcript is built from (docs/architecture.md, "Transcripts"). Not to be
confused with `batch_record.BatchRecord`, a batch's first rows kept as data
before they are written."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, select

from runtime.ledger.tables import ApprovalRow, BatchRow, CallRow, EndRow, EventRow
from runtime.types import ToolResult


@dataclass(frozen=True)
class BatchSnapshot:
    """What the ledger holds of one batch now, read in one transaction."""

    batch: BatchRow
    calls: list[CallRow]  # in the model's order
    events: list[EventRow]  # in the order they were written
    approvals: dict[str, ApprovalRow]  # by call id
    ends: dict[str, ToolResult]  # by call id


def record(session: Session, batch_id: str) -> BatchSnapshot | None:
    batch = session.get(BatchRow, batch_id)
    if batch is None:
        return None
    calls = select(CallRow).where(CallRow.batch_id == batch_id).order_by(CallRow.position)
    events = select(EventRow).where(EventRow.batch_id == batch_id).order_by(EventRow.id)
    approvals = select(ApprovalRow).where(ApprovalRow.batch_id == batch_id)
    ends = select(EndRow.call_id, EndRow.result).where(EndRow.batch_id == batch_id)
    return BatchSnapshot(
        batch=batch,
        calls=list(session.exec(calls).all()),
        events=list(session.exec(events).all()),
        approvals={row.call_id: row for row in session.exec(approvals).all()},
        ends={
            row.call_id: ToolResult.model_validate(row.result) for row in session.exec(ends).all()
        },
    )


def last_turn(session: Session, conversation: str) -> BatchRow | None:
    query = (
        select(BatchRow)
        .where(BatchRow.conversation == conversation)
        .order_by(BatchRow.created_at.desc(), BatchRow.id.desc())
        .limit(1)
    )
    return session.exec(query).first()
