"""The rows a batch writes from the client's side: the batch, its calls, one
decision per call before anything runs, and every end the client decides
(refusals, skips, deadlines, approval answers)."""

from __future__ import annotations

import logging
from functools import partial

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
        writes = [
            lambda: self.ledger.record_batch(self.batch, risks=risks,
                                             policy_version=self.policy.version),
            lambda: self.ledger.record_many(rows),
            *[partial(self._refused, refused) for refused in admissions
              if isinstance(refused, Refused)],
        ]  # fmt: skip
        for index, write in enumerate(writes):
            try:
                write()
            except LedgerUnavailable as error:
                # Side effects will not run (the caller fails closed); the rows of
                # the reads, which do, wait in the buffer with the rest.
                log.error("ledger unavailable for batch %s, its rows wait: %s", self.batch.id,
                          error)  # fmt: skip
                for later in writes[index:]:
                    self.ledger.later(later)
                return False
        return True

    def _refused(self, refused: Refused) -> None:
        risk = refused.spec.risk.value if refused.spec else None
        self.ledger.record_result(self.batch.id, refused.result, kind=refused.event,
                                  **self._fields(refused.decision, risk))  # fmt: skip

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
