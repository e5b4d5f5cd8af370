"""The rows a batch writes from the client's side: the batch, its calls, one
decision per call before anything runs, and the ends the client decides
(refusals; without the ledger, the side effects that did not run)."""

from __future__ import annotations

import logging
from collections.abc import Callable
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
        self._write_later: Callable[[list[CallEnd]], bool] = lambda closed: False

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
        written. `buffered`: the ledger is unavailable; the caller fails
        closed and hands the ends of what did not run to `keep`."""
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

        def write(closed: list[CallEnd] = ()) -> bool:
            recorded = self.ledger.record_batch(
                self.batch,
                risks=risks,
                events=events,
                policy_version=self.policy.version,
                ends=[*ends, *closed],
                plan=plan,
                columns=columns,
            )
            self.theirs = not recorded
            return recorded

        try:
            recorded = write()
        except LedgerUnavailable as error:
            log.error("ledger unavailable for batch %s, its rows wait: %s", self.batch.id, error)
            self._write_later = write
            return Recording.buffered
        return Recording.recorded if recorded else Recording.found

    def keep(self, closed: list[ToolResult]) -> None:
        """After `admissions` said `buffered`: the batch's rows, whole (its key,
        deadline and plan), for when the ledger is back, in one transaction
        with `closed`, the ends of its calls that did not run without the
        ledger. Whoever then carries the batch on from its plan (the sweep)
        finds those calls ended and sends none of them (docs/architecture.md,
        "The ledger")."""
        fields = self._fields(None, None)
        ends = [
            CallEnd(self.batch.id, result, redactor=self.ledger.redactor, **fields)
            for result in closed
        ]
        write = self._write_later
        self.ledger.later(lambda: write(ends))

    def _fields(self, decision: Decision | None, risk: str | None) -> dict[str, str | None]:
        fields = {
            "mode": self.batch.mode.value,
            "policy_version": self.policy.version,
            "risk": risk,
        }
        if decision is not None:
            fields |= decision.as_dict()
        return fields
