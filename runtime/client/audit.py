"""The rows a batch writes from the client's side: the batch, its calls, one
decision per call before anything runs, and every end the client decides
(refusals, skips, deadlines, approval answers)."""

from __future__ import annotations

import logging
from enum import StrEnum

from runtime.errors import LedgerUnavailable
from runtime.gate.admission import Admitted, Refused
from runtime.gate.decision import Decision
from runtime.gate.policy import Policy
from runtime.ledger.rows import event_fields
from runtime.ledger.store import CallEnd, EventKind, Ledger
from runtime.types import Batch, ToolResult

log = logging.getLogger("toolrun.audit")


class Recording(StrEnum):
    """What became of a batch's first rows."""

    recorded = "recorded"  # written now: the batch is this submit's to send
    found = "found"  # another submitter of its key recorded it first: nothing was written
    buffered = "buffered"  # the ledger is unavailable: the rows wait (the caller fails closed)


class BatchAudit:
    def __init__(self, ledger: Ledger, batch: Batch, policy: Policy) -> None:
        self.ledger = ledger
        self.batch = batch
        self.policy = policy
        self.theirs = False  # its rows, once buffered, found the batch recorded by another

    def admissions(
        self,
        admissions: list[Admitted | Refused],
        *,
        plan: dict | None = None,
        columns: dict | None = None,
    ) -> Recording:
        """Batch row, call rows and a decision row per admitted call, before
        anything runs, in one transaction with the batch's `plan` and `columns`
        (key, fingerprint, deadline); a refused call's one row is its end, with
        the decision that ended it. `found`: the batch id was recorded before
        (a racing submitter of its key won), and none of these rows was
        written. `buffered`: the ledger is unavailable (the caller fails
        closed; the rows, without the plan, wait in the buffer)."""
        events = [
            event_fields(
                self.batch.id,
                a.call.id,
                EventKind.decision,
                redactor=self.ledger.redactor,
                **self._fields(a.decision, a.spec.risk.value),
            )
            for a in admissions
            if isinstance(a, Admitted)
        ]
        ends = [
            CallEnd(
                self.batch.id,
                a.result,
                kind=a.event,
                redactor=self.ledger.redactor,
                **self._fields(a.decision, a.spec.risk.value if a.spec else None),
            )
            for a in admissions
            if isinstance(a, Refused)
        ]
        risks = {a.call.id: a.spec.risk.value if a.spec else None for a in admissions}

        def write(**owned) -> bool:
            recorded = self.ledger.record_batch(
                self.batch,
                risks=risks,
                events=events,
                policy_version=self.policy.version,
                ends=ends,
                **owned,
            )
            self.theirs = not recorded
            return recorded

        try:
            recorded = write(plan=plan, columns=columns)
        except LedgerUnavailable as error:
            log.error("ledger unavailable for batch %s, its rows wait: %s", self.batch.id, error)
            self.ledger.later(write)  # no plan: nobody carries the batch on later
            return Recording.buffered
        return Recording.recorded if recorded else Recording.found

    def end(
        self,
        result: ToolResult,
        kind: EventKind = EventKind.finished,
        decision: Decision | None = None,
    ) -> None:
        """A call's end decided on the client's side: now, or from the buffer
        once the ledger is back (after this batch's rows that wait there). Not
        at all if those rows found the batch recorded by another submitter of
        its key: its calls' ends are that batch's, not this process's."""
        fields = self._fields(decision, None)

        def write() -> None:
            if not self.theirs:
                self.ledger.record_result(self.batch.id, result, kind=kind, **fields)

        self.ledger.eventually(write)

    def _fields(self, decision: Decision | None, risk: str | None) -> dict[str, str | None]:
        fields = {
            "mode": self.batch.mode.value,
            "policy_version": self.policy.version,
            "risk": risk,
        }
        if decision is not None:
            fields |= decision.as_dict()
        return fields
