"""The rows a batch writes from the client's side: the batch, its calls, one
decision per call before anything runs, and every end the client decides
(refusals, skips, deadlines, approval answers)."""

from __future__ import annotations

import logging

from runtime.errors import LedgerUnavailable
from runtime.gate.admission import Admitted, Refused
from runtime.gate.decision import Decision
from runtime.gate.policy import Policy
from runtime.ledger.rows import event_fields
from runtime.ledger.store import CallEnd, EventKind, Ledger
from runtime.types import Batch, ToolResult

log = logging.getLogger("toolrun.audit")


class BatchAudit:
    def __init__(self, ledger: Ledger, batch: Batch, policy: Policy) -> None:
        self.ledger = ledger
        self.batch = batch
        self.policy = policy

    def admissions(self, admissions: list[Admitted | Refused], *, plan: dict | None = None,
                   columns: dict | None = None) -> bool:  # fmt: skip
        """Batch row, call rows and a decision row per admitted call, before
        anything runs, in one transaction with the batch's `plan` and `columns`
        (key, fingerprint, deadline); a refused call's one row is its end, with
        the decision that ended it. False if the ledger is unavailable (the
        caller fails closed; the rows, without the plan, wait in the buffer)."""
        events = [
            event_fields(self.batch.id, a.call.id, EventKind.decision,
                         redactor=self.ledger.redactor,
                         **self._fields(a.decision, a.spec.risk.value))
            for a in admissions
            if isinstance(a, Admitted)
        ]  # fmt: skip
        ends = [
            CallEnd(self.batch.id, a.result, kind=a.event, redactor=self.ledger.redactor,
                    **self._fields(a.decision, a.spec.risk.value if a.spec else None))
            for a in admissions
            if isinstance(a, Refused)
        ]  # fmt: skip
        risks = {a.call.id: a.spec.risk.value if a.spec else None for a in admissions}

        def write(**owned) -> None:
            self.ledger.record_batch(self.batch, risks=risks, policy_version=self.policy.version,
                                     events=events, ends=ends, **owned)  # fmt: skip

        try:
            write(plan=plan, columns=columns)
        except LedgerUnavailable as error:
            log.error("ledger unavailable for batch %s, its rows wait: %s", self.batch.id, error)
            self.ledger.later(write)  # no plan: nobody carries the batch on later
            return False
        return True

    def end(self, result: ToolResult, kind: EventKind = EventKind.finished,
            decision: Decision | None = None) -> None:  # fmt: skip
        """A call's end decided on the client's side: now, or from the buffer
        once the ledger is back (after this batch's rows that wait there)."""
        fields = self._fields(decision, None)
        self.ledger.eventually(
            lambda: self.ledger.record_result(self.batch.id, result, kind=kind, **fields)
        )

    def _fields(self, decision: Decision | None, risk: str | None) -> dict[str, str | None]:
        fields = {"mode": self.batch.mode.value, "policy_version": self.policy.version,
                  "risk": risk}  # fmt: skip
        if decision is not None:
            fields |= decision.as_dict()
        return fields
