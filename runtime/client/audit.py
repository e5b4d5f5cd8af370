"""The rows a batch writes from the client's side: the batch, its calls, one
decision per call before anything runs, and the ends the client decides
(refusals; without the ledger, the side effects that did not run)."""

from __future__ import annotations

import logging
from enum import StrEnum

from runtime.errors import LedgerUnavailable
from runtime.gate.admission import Admitted, Refused
from runtime.gate.decision import Decision
from runtime.gate.policy import Policy
from runtime.ledger.batch_record import BatchRecord, EndRecord
from runtime.ledger.rows import event_fields
from runtime.ledger.store import EventKind, Ledger, Recorded
from runtime.types import Batch, ToolResult

log = logging.getLogger("toolrun.audit")


class Recording(StrEnum):
    """What became of a batch's first rows."""

    recorded = "recorded"  # written now: the batch is this submit's to send
    ended = "ended"  # written now, after every call had ended (it was sent first)
    found = "found"  # another submitter of its key recorded it first: nothing was written
    buffered = "buffered"  # the ledger is unavailable: the rows wait (the caller fails closed)


class BatchAudit:
    def __init__(
        self,
        ledger: Ledger,
        batch: Batch,
        policy: Policy,
        owner: dict | None = None,
        hooks: list[dict] | None = None,
    ) -> None:
        """`owner`: the gateway key that submits the batch, written with its
        record; `hooks`: the rows of what its pre hooks answered, written with it too."""
        self.ledger = ledger
        self.batch = batch
        self.policy = policy
        self.owner = owner
        self.hooks = hooks or []
        self.owned = False  # whether this submit wrote `owner` (with the batch's record)
        self.theirs = False  # its rows, once buffered, found the batch recorded by another
        self.record: BatchRecord | None = None  # what `admissions` writes, kept as data

    def admissions(
        self,
        admissions: list[Admitted | Refused],
        *,
        plan: dict | None = None,
        columns: dict | None = None,
        open_cap: int | None = None,
    ) -> Recording:
        """Batch row, call rows and a decision row per admitted call, before
        anything runs, in one transaction with the batch's `plan` and `columns`
        (key, fingerprint, deadline); a refused call's one row is its end, with
        the decision that ended it. `found`: the batch id was recorded before
        (a racing submitter of its key won), and none of these rows was
        written. `buffered`: the ledger is unavailable; the caller fails
        closed and hands the ends of what did not run to `keep`. `open_cap`:
        the submitter's cap on open batches, taken with the write (over it,
        TooManyOpenBatches and nothing written)."""
        self.prepare(admissions, plan=plan, columns=columns)
        return self.write(open_cap=open_cap)

    def prepare(
        self,
        admissions: list[Admitted | Refused],
        *,
        plan: dict | None = None,
        columns: dict | None = None,
    ) -> BatchRecord:
        """The rows `admissions` writes, as data, written by `write`."""
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
        ] + self.hooks
        ends = [
            EndRecord(
                a.result,
                a.event,
                self._fields(a.decision, a.spec.risk.value if a.spec else None),
            )
            for a in admissions
            if isinstance(a, Refused)
        ]
        self.record = BatchRecord(
            batch=self.batch,
            risks={a.call.id: a.spec.risk.value if a.spec else None for a in admissions},
            policy_version=self.policy.version,
            events=events,
            ends=ends,
            plan=plan,
            columns=columns or {},
            redacted_by=self.ledger.redactor,
            owner=self.owner,
        )
        return self.record

    def planned(self, plan: dict) -> None:
        """The prepared record's plan, given after it (a batch sent before it
        is recorded: runtime/client/first_send.py)."""
        self.record = self.record.with_plan(plan)

    def write(self, *, open_cap: int | None = None) -> Recording:
        """Write the prepared record in one transaction (`admissions`' answers)."""
        try:
            recorded = self.record.write(self.ledger, open_cap=open_cap)
        except LedgerUnavailable as error:
            log.error("ledger unavailable for batch %s, its rows wait: %s", self.batch.id, error)
            return Recording.buffered
        self.owned = self.owner is not None and bool(recorded)
        if recorded is Recorded.ended:
            return Recording.ended
        return Recording.recorded if recorded else Recording.found

    def closing(self, closed: list[ToolResult]) -> BatchRecord:
        """After `admissions` said `buffered`: the batch's rows, whole (its key,
        deadline and plan), with `closed`, the ends of its calls that did not
        run without the ledger. Whoever carries the batch on from its plan (the
        sweep) finds those calls ended and sends none of them
        (docs/architecture.md, "The ledger"). The record, for the cluster to
        keep too (a submitter may not live until the ledger is back), and for
        `keep`."""
        fields = self._fields(None, None)
        return self.record.with_ends([EndRecord(result, fields=fields) for result in closed])

    def keep(self, record: BatchRecord) -> None:
        """Write `record` in one transaction once the ledger is back."""

        def write() -> None:
            self.theirs = not record.write(self.ledger)

        self.ledger.later(write)

    def _fields(self, decision: Decision | None, risk: str | None) -> dict[str, str | None]:
        fields = {
            "mode": self.batch.mode.value,
            "policy_version": self.policy.version,
            "risk": risk,
        }
        if decision is not None:
            fields |= decision.as_dict()
        return fields
