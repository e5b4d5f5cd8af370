"""Approvals: a call that needs asking waits, stored in the ledger, until someone
holding the batch id answers it from any process, or it expires.

The answer is an atomic `pending → approved | denied | expired` transition, so
exactly one answer wins. Updated arguments travel through the transport's
doorbell (they may hold secrets, and the ledger keeps only redacted data), which
also wakes the waiting batch; it re-reads the row every second anyway.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, select

from runtime.ledger.store import ApprovalRow, EventKind, Ledger
from runtime.ledger.tables import utc_now
from runtime.results.redaction import redact
from runtime.transport.base import Doorbell

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Answer:
    status: str  # approved, denied, expired
    by: str | None
    reason: str | None
    arguments: Any = None  # updated arguments, when the approver changed them
    updated: bool = False


class Approvals:
    def __init__(self, ledger: Ledger, bell: Doorbell | None = None) -> None:
        self.ledger = ledger
        self.bell = bell  # None: this process only reads approvals (status)

    def request(
        self, batch_id: str, call_id: str, *, tool: str, arguments: Any, reason: str,
        timeout: float,
    ) -> ApprovalRow:  # fmt: skip
        row = ApprovalRow(
            batch_id=batch_id, call_id=call_id, tool=tool, arguments=redact(arguments),
            reason=reason, expires_at=utc_now() + timedelta(seconds=timeout),
        )  # fmt: skip
        self.ledger.transaction(lambda session: session.merge(row))
        self.ledger.record_event(batch_id, call_id, EventKind.approval_asked, reason=reason)
        return row

    def answer(
        self, batch_id: str, call_id: str, *, approve: bool, by: str, reason: str | None = None,
        updated_arguments: Any = None,
    ) -> bool:  # fmt: skip
        """Approve or deny a pending call. False if it is not pending (answered,
        expired, or unknown): the first answer wins."""
        updated = updated_arguments is not None
        if approve and updated:
            self.bell.stash(batch_id, call_id, updated_arguments)
        status = "approved" if approve else "denied"
        won = self._transition(batch_id, call_id, status, by=by, answer=reason, updated=updated)
        if won:
            kind = EventKind.approval_given if approve else EventKind.approval_refused
            self.ledger.record_event(
                batch_id, call_id, kind, approver=by, reason=reason,
                detail={"updated_arguments": redact(updated_arguments)} if updated else None,
            )  # fmt: skip
            self.bell.ring(batch_id, call_id)
        return won

    def wait(self, batch_id: str, call_id: str, *, deadline: float, stop=lambda: False) -> Answer:
        """Block until the call is answered or `deadline` (monotonic) passes (or
        `stop()` says the batch is over); then it expires, unless an answer won."""
        with self.bell.listening(batch_id) as waiter:
            while True:
                row = self.get(batch_id, call_id)
                if row is not None and row.status != "pending":
                    return self._answer(row)
                left = deadline - time.monotonic()
                if left <= 0 or stop():
                    self._transition(
                        batch_id, call_id, "expired", by=None, answer="approval timed out"
                    )
                    return self._answer(self.get(batch_id, call_id))
                waiter.wait(min(POLL_SECONDS, left))

    def get(self, batch_id: str, call_id: str) -> ApprovalRow | None:
        key = {"batch_id": batch_id, "call_id": call_id}
        return self.ledger.transaction(lambda s: s.get(ApprovalRow, key), write=False)

    def pending(self, batch_id: str | None = None) -> list[ApprovalRow]:
        query = select(ApprovalRow).where(ApprovalRow.status == "pending")
        if batch_id is not None:
            query = query.where(ApprovalRow.batch_id == batch_id)
        query = query.order_by(ApprovalRow.requested_at)
        return self.ledger.transaction(lambda s: list(s.exec(query).all()), write=False)

    def _transition(self, batch_id, call_id, status, *, by, answer, updated=False) -> bool:
        statement = (
            update(ApprovalRow)
            .where(ApprovalRow.batch_id == batch_id, ApprovalRow.call_id == call_id,
                   ApprovalRow.status == "pending")
            .values(status=status, answered_by=by, answered_at=utc_now(), answer=answer,
                    updated_arguments=updated)
        )  # fmt: skip

        def work(session: Session) -> bool:
            return session.exec(statement).rowcount == 1

        return self.ledger.transaction(work)

    def _answer(self, row: ApprovalRow) -> Answer:
        arguments = None
        if row.status == "approved" and row.updated_arguments:
            arguments = self.bell.unstash(row.batch_id, row.call_id)
        return Answer(row.status, row.answered_by, row.answer, arguments, row.updated_arguments)
