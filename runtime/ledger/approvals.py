"""Approvals: a call that needs asking is stored in the ledger, and nothing
waits for it (no thread, no process). Anyone holding the batch id answers it
from any process until it expires; whoever answers (or the sweep, once it has
expired) moves the batch on (docs/architecture.md, "A batch the cluster owns").

The answer is an atomic `pending → approved | denied | expired` transition, so
exactly one answer wins, and an expired approval cannot be answered, nor one
whose call has ended otherwise (its batch cancelled, its deadline passed): such
a request has left the pending list too. What the
approver answered is this row alone: the arguments they gave are stored here,
as given, with a seal (an HMAC under the signing key) over the answer, the
approver and those arguments. A row changed by anyone without the key no
longer matches its seal, and its call fails closed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any

from sqlalchemy import exists, insert, update
from sqlmodel import Session, select

from runtime.keyring import Purpose, derived
from runtime.ledger.chain import event_hash, stamped
from runtime.ledger.dialects import insert_for
from runtime.ledger.rows import EVENTS, event_fields
from runtime.ledger.store import ApprovalRow, EventKind, Ledger
from runtime.ledger.tables import EndRow, utc_now

APPROVALS = ApprovalRow.__table__
# The call of the request has not ended: an ended call has nothing left to answer.
OPEN = ~exists().where(
    EndRow.batch_id == ApprovalRow.batch_id, EndRow.call_id == ApprovalRow.call_id
)


def seal_of(
    key: bytes, batch_id: str, call_id: str, status: str, by: str | None, arguments: Any
) -> str:
    body = json.dumps(
        [batch_id, call_id, status, by, arguments],
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    own = derived(key, Purpose.approval)  # approvals' own key (runtime/keyring.py)
    return hmac.new(own, body.encode(), hashlib.sha256).hexdigest()


def sealed(key: bytes, row: ApprovalRow) -> bool:
    """Whether an answered row is as its answerer left it."""
    if row.status == "pending":
        return True
    expected = seal_of(
        key, row.batch_id, row.call_id, row.status, row.answered_by, row.arguments_given
    )
    return isinstance(row.seal, str) and hmac.compare_digest(row.seal, expected)


class Approvals:
    def __init__(self, ledger: Ledger, key: bytes | None = None) -> None:
        self.ledger = ledger
        self.key = key  # None: this process only reads approvals (status)

    def request(
        self,
        batch_id: str,
        call_id: str,
        *,
        tool: str,
        arguments: Any,
        reason: str,
        timeout: float,
    ) -> bool:
        """Store the request, once: True if this call stored it (and recorded
        `approval_asked`), False if it was stored already."""
        row = {
            "batch_id": batch_id,
            "call_id": call_id,
            "tool": tool,
            "status": "pending",
            "arguments": self.ledger.redactor.redact(arguments),
            "reason": reason,
            "requested_at": utc_now(),
            "expires_at": utc_now() + timedelta(seconds=timeout),
            "updated_arguments": False,
        }

        def work(connection) -> bool:
            make = insert_for(connection.dialect.name)
            statement = (
                make(APPROVALS)
                .values(**row)
                .on_conflict_do_nothing()
                .returning(APPROVALS.c.call_id)
            )
            return connection.execute(statement).first() is not None

        stored = self.ledger.transaction(work, core=True)
        if stored:
            self.ledger.record_event(batch_id, call_id, EventKind.approval_asked, reason=reason)
        return stored

    def answer(
        self,
        batch_id: str,
        call_id: str,
        *,
        approve: bool,
        by: str,
        reason: str | None = None,
        updated_arguments: Any = None,
    ) -> bool:
        """Approve or deny a pending call. False if it is not pending (answered,
        expired, or unknown): the first answer wins."""
        updated = updated_arguments is not None
        status = "approved" if approve else "denied"
        # As the JSON column will give it back, so that the seal matches what is read.
        given = json.loads(json.dumps(updated_arguments)) if approve and updated else None
        # The answer's event lands in the answer's own transaction: anyone who
        # sees the call approved, and sends it, finds the event before the
        # call's `started` (the events' order is their ids').
        event = event_fields(
            batch_id,
            call_id,
            EventKind.approval_given if approve else EventKind.approval_refused,
            approver=by,
            reason=reason,
            detail={"updated_arguments": updated_arguments} if updated else None,
            redactor=self.ledger.redactor,
        )
        return self._transition(
            batch_id,
            call_id,
            status,
            by=by,
            answer=reason,
            updated=approve and updated,
            given=given,
            event=event,
        )

    def expire(self, batch_id: str, call_id: str) -> bool:
        return self._transition(
            batch_id, call_id, "expired", by=None, answer="approval timed out", any_time=True
        )

    def expired(self) -> list[tuple[str, str]]:
        """Pending approvals past their expiry, as (batch id, call id)."""
        query = select(ApprovalRow).where(
            ApprovalRow.status == "pending", ApprovalRow.expires_at <= utc_now()
        )
        rows = self.ledger.transaction(lambda s: list(s.exec(query).all()), write=False)
        return [(row.batch_id, row.call_id) for row in rows]

    def get(self, batch_id: str, call_id: str) -> ApprovalRow | None:
        key = {"batch_id": batch_id, "call_id": call_id}
        return self.ledger.transaction(lambda s: s.get(ApprovalRow, key), write=False)

    def find(self, call_id: str, batch_id: str | None = None) -> list[ApprovalRow]:
        """Every request for `call_id` (in `batch_id`), whatever its state."""
        query = select(ApprovalRow).where(ApprovalRow.call_id == call_id)
        if batch_id is not None:
            query = query.where(ApprovalRow.batch_id == batch_id)
        return self.ledger.transaction(lambda s: list(s.exec(query).all()), write=False)

    def of_batch(self, batch_id: str) -> dict[str, ApprovalRow]:
        query = select(ApprovalRow).where(ApprovalRow.batch_id == batch_id)
        rows = self.ledger.transaction(lambda s: list(s.exec(query).all()), write=False)
        return {row.call_id: row for row in rows}

    def pending(self, batch_id: str | None = None) -> list[ApprovalRow]:
        """Calls waiting for an answer that can still be given (not expired, not ended)."""
        query = select(ApprovalRow).where(
            ApprovalRow.status == "pending", ApprovalRow.expires_at > utc_now(), OPEN
        )
        if batch_id is not None:
            query = query.where(ApprovalRow.batch_id == batch_id)
        query = query.order_by(ApprovalRow.requested_at)
        return self.ledger.transaction(lambda s: list(s.exec(query).all()), write=False)

    def _transition(
        self,
        batch_id,
        call_id,
        status,
        *,
        by,
        answer,
        updated=False,
        given=None,
        any_time=False,
        event: dict[str, Any] | None = None,
    ) -> bool:
        if self.key is None:
            raise RuntimeError("answering an approval needs the signing key")
        seal = seal_of(self.key, batch_id, call_id, status, by, given)
        where = [
            ApprovalRow.batch_id == batch_id,
            ApprovalRow.call_id == call_id,
            ApprovalRow.status == "pending",
        ]
        if not any_time:  # an expired request cannot be answered, nor one whose call ended
            where += [ApprovalRow.expires_at > utc_now(), OPEN]
        statement = (
            update(ApprovalRow)
            .where(*where)
            .values(
                status=status,
                answered_by=by,
                answered_at=utc_now(),
                answer=answer,
                updated_arguments=updated,
                arguments_given=given,
                seal=seal,
            )
        )

        def work(session: Session) -> bool:
            won = session.exec(statement).rowcount == 1
            if won and event is not None:
                connection = session.connection()
                connection.execute(insert(EVENTS), stamped(connection, [event], event_hash))
            return won

        return self.ledger.transaction(work)
