"""The rows a batch writes from the client's side: the batch, its calls, one
decision per call before anything runs, and every end the client decides
(refusals, skips, deadlines, approval answers)."""

from __future__ import annotations

import logging

from runtime.admission import Admitted, Refused
from runtime.decision import Decision
from runtime.errors import LedgerUnavailable
from runtime.ledger import EventKind, EventRow, Ledger
from runtime.policy import Policy
from runtime.types import Batch, ToolResult

log = logging.getLogger("toolrun.audit")


class BatchAudit:
    def __init__(self, ledger: Ledger, batch: Batch, policy: Policy) -> None:
        self.ledger = ledger
        self.batch = batch
        self.policy = policy

    def admissions(self, admissions: list[Admitted | Refused]) -> bool:
        """Batch row, call rows and a decision row per admitted call, before
        anything runs; a refused call's one row is its end, with the decision
        that ended it. False if the ledger is unavailable (fail closed)."""
        rows = [
            EventRow(batch_id=self.batch.id, call_id=a.call.id, kind=EventKind.decision.value,
                     **self._fields(a.decision, a.spec.risk.value))
            for a in admissions
            if isinstance(a, Admitted)
        ]  # fmt: skip
        risks = {a.call.id: a.spec.risk.value if a.spec else None for a in admissions}
        try:
            self.ledger.record_batch(self.batch, risks=risks, policy_version=self.policy.version)
            self.ledger.record_many(rows)
            for refused in admissions:
                if isinstance(refused, Refused):
                    risk = refused.spec.risk.value if refused.spec else None
                    self.ledger.record_result(
                        self.batch.id,
                        refused.result,
                        kind=refused.event,
                        **self._fields(refused.decision, risk),
                    )
        except LedgerUnavailable as error:
            log.error("ledger unavailable for batch %s: %s", self.batch.id, error)
            return False
        return True

    def end(self, result: ToolResult, kind: EventKind = EventKind.finished,
            decision: Decision | None = None) -> None:  # fmt: skip
        """A call's end decided on the client's side; logged, not raised, if the
        ledger is down (the call did not run, so nothing is lost but the row)."""
        try:
            self.ledger.record_result(
                self.batch.id, result, kind=kind, **self._fields(decision, None)
            )
        except LedgerUnavailable as error:
            log.error("ledger unavailable for batch %s: %s", self.batch.id, error)

    def _fields(self, decision: Decision | None, risk: str | None) -> dict[str, str | None]:
        fields = {"mode": self.batch.mode.value, "policy_version": self.policy.version,
                  "risk": risk}  # fmt: skip
        if decision is not None:
            fields |= decision.as_dict()
        return fields
