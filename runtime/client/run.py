"""A batch from its submitter's side: admit every call, record the batch with
its decisions and its plan in one transaction, send what may start, and hand
the results to the handle as they arrive.

Once `start` has returned the batch belongs to the cluster: workers, the
sweep and whoever answers an approval carry it on, and nothing here has to
stay alive (docs/architecture.md, "A batch the cluster owns"). `look`, on
one of the follower's threads, only delivers what arrived to this process's
handles (docs/architecture.md, "Following batches").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime import clock
from runtime.batch import plan as plans
from runtime.batch.advance import Advancer
from runtime.batch.plan import BatchPlan
from runtime.batch.signer import Signer
from runtime.client import first_send
from runtime.client.audit import BatchAudit, Recording
from runtime.client.events import BatchEvents
from runtime.client.fingerprint import fingerprint
from runtime.errors import LedgerUnavailable, TooManyOpenBatches
from runtime.execution import budgets_at_start_and_end
from runtime.flow.budgets import Spending
from runtime.gate.admission import Admitted, Refused, admit
from runtime.gate.hooks import pre as pre_hooks
from runtime.gate.policy import Policy
from runtime.ledger.approvals import Approvals
from runtime.ledger.batch_record import BatchRecord
from runtime.registry.capabilities import Registry
from runtime.transport.base import Inbox, Transport
from runtime.types import ApprovalRequested, Batch, Status, ToolResult

log = logging.getLogger("toolrun.batch")
DEADLINE_GRACE = 2.0  # seconds past the deadline before a follower ends the batch itself
LEDGER_EVERY = 5  # thorough looks between two reads of the ledger's ends (Redis may lose some)
TOKENS = ("input_tokens", "output_tokens")  # the model's usage, among a batch's columns
Admissions = list[Admitted | Refused]  # one per call, in the model's order
Columns = dict[str, Any] | None  # a batch row's columns beside its calls


@dataclass(frozen=True)
class Services:
    """What every batch of one `Runtime` shares."""

    registry: Registry
    approvals: Approvals
    transport: Transport
    advancer: Advancer
    key: bytes
    approval_timeout: float
    max_argument_bytes: int


class BatchRun:
    """One batch as this process follows it: recorded and sent by `start`, or
    found in the ledger by `attach`; then `look` hands each arrival to its
    `events`, on the follower's thread (runtime/client/follower.py)."""

    def __init__(self, batch: Batch, services: Services) -> None:
        self.batch, self.services = batch, services
        self.submitted = batch  # as the model sent it: pre hooks may replace arguments
        self.hook_rows: list[dict] = []  # what the pre hooks answered, recorded with the batch
        self.events = BatchEvents([call.id for call in batch.calls])
        self.order = {call.id: index for index, call in enumerate(batch.calls)}
        self.inbox: Inbox | None = None
        self.deadline: float | None = None  # epoch seconds
        self.tokens: dict[str, Any] = {}  # the model's, as the batch's row holds them
        self.owned = False  # its start wrote the gateway's owner row with its record
        self._looks = 0

    @property
    def done(self) -> bool:
        return self.events.done

    def start(
        self,
        policy: Policy,
        *,
        deadline: float,
        key: str | None,
        columns: dict[str, Any] | None = None,
        traceparent: str | None = None,
        open_cap: int | None = None,
        owner: dict[str, Any] | None = None,
    ) -> bool:
        """Record the batch with its plan and send its first stage. If the
        ledger is unavailable the batch cannot belong to the cluster: its reads
        run now and its side effects end unrun (fail closed). False: another
        submitter of its key recorded the batch (or kept its record) first, and this one wrote and
        sent nothing (the caller checks the key and attaches). `traceparent`: the
        trace every task message of the batch carries (runtime/tracing.py).
        `open_cap`: the submitter's cap on open batches, taken with the record
        (TooManyOpenBatches, nothing written or sent), so such a batch is
        never sent before it is recorded (docs/architecture.md, "Flow control").
        `owner`: the gateway key's row, in the record's transaction (`owned`)."""
        self.deadline = deadline
        self.inbox = self.services.transport.watch(self.batch.id)  # before anything is sent
        admissions = self._admit(policy)
        plan = self._plan(admissions, policy, deadline=deadline, traceparent=traceparent)
        columns = self._columns(policy, plan, deadline=deadline, key=key, given=columns)
        audit = BatchAudit(
            self.services.approvals.ledger, self.batch, policy, owner, self.hook_rows
        )
        if key is None and open_cap is None and first_send.reads_only(plan):
            first_send.send_first(
                audit,
                admissions,
                plan,
                columns,
                advancer=self.services.advancer,
                transport=self.services.transport,
                events=self.events,
            )
            self.owned = audit.owned
            return True
        return self._record_and_send(audit, admissions, plan, columns, open_cap=open_cap)

    def _admit(self, policy: Policy) -> Admissions:
        """Each call through the gate, then the budgets' hold on those let
        through (docs/architecture.md, "Usage and budgets")."""
        batch, services = self.batch, self.services
        admissions = [
            admit(
                call,
                registry=services.registry,
                mode=batch.mode,
                workspace=Path(batch.workspace),
                policy=policy,
                max_argument_bytes=services.max_argument_bytes,
            )
            for call in batch.calls
        ]
        admissions = self._screen(admissions, policy)
        spending = Spending.from_snapshot(policy.spending)
        return budgets_at_start_and_end.hold(admissions, spending, services.transport, batch.id)

    def _screen(self, admissions: Admissions, policy: Policy) -> Admissions:
        """The policy's pre hooks on every admitted call (docs/architecture.md,
        "Policy hooks"); a call whose arguments a hook replaced carries them
        from here on, in the batch's rows, its plan and its message."""
        if not any(hook.when == "pre" for hook in policy.hooks):
            return admissions
        batch, services = self.batch, self.services
        redactor = services.approvals.ledger.redactor
        gate = pre_hooks.Gate(
            registry=services.registry,
            mode=batch.mode,
            workspace=Path(batch.workspace),
            policy=policy,
            batch_id=batch.id,
            key=services.key,
            redactor=redactor,
            max_argument_bytes=services.max_argument_bytes,
        )
        screened = [pre_hooks.screen(admission, gate) for admission in admissions]
        self.hook_rows = [
            pre_hooks.event(batch.id, s.admission.call.id, asked, redactor)
            for s in screened
            for asked in s.consulted
        ]
        calls = {s.admission.call.id: s.admission.call for s in screened}
        self.batch = batch.model_copy(update={"calls": [calls[c.id] for c in batch.calls]})
        return [s.admission for s in screened]

    def _plan(
        self, admissions: Admissions, policy: Policy, *, deadline: float, traceparent: str | None
    ) -> BatchPlan:
        """The batch's stages, each call's task message signed in it."""
        reply_to = self.services.transport.reply_to
        snapshot = policy.snapshot()
        signer = Signer(
            self.services.key, self.batch, snapshot, reply_to=reply_to, traceparent=traceparent
        )
        return plans.build(
            self.batch,
            admissions,
            sign=lambda a, where: signer.message(a, stage=where),
            policy=signer.snapshot,
            reply_to=reply_to,
            deadline=deadline,
            approval_timeout=self.services.approval_timeout,
            traceparent=traceparent,
        )

    def _columns(
        self, policy: Policy, plan: BatchPlan, *, deadline: float, key: str | None, given: Columns
    ) -> dict[str, Any]:
        """The batch row's columns beside its calls (written from the buffer
        too, as they are now); keeps the model's tokens among them."""
        self.tokens = {name: (given or {}).get(name) for name in TOKENS}
        return {
            "key": key,
            "fingerprint": fingerprint(self.submitted, policy),
            "deadline_at": datetime.fromtimestamp(deadline, UTC),
            "created_at": datetime.now(UTC),
            # What the batch's transcript tells (docs/architecture.md, "Transcripts"):
            "policy_files": list(dict.fromkeys(rule.source for rule in policy.rules)),
            "stages": [stage.model_dump(mode="json") for stage in plan.stages],
            **(given or {}),
        }

    def _record_and_send(
        self,
        audit: BatchAudit,
        admissions: Admissions,
        plan: BatchPlan,
        columns: Columns,
        *,
        open_cap: int | None,
    ) -> bool:
        """Record the batch with its plan in one transaction (or keep its
        record while the ledger is away), then send its first stage: `start`'s
        answer."""
        body = plan.model_dump(mode="json")  # the ledger's copy, and Redis's
        try:
            recording = audit.admissions(admissions, plan=body, columns=columns, open_cap=open_cap)
        except TooManyOpenBatches:
            self.unwatch()
            raise
        self.owned = audit.owned
        if recording is Recording.found:
            self.unwatch()
            return False
        refusals = {a.call.id: a.result for a in admissions if isinstance(a, Refused)}
        for result in refusals.values():
            self.events.end(result)
        if recording is Recording.buffered:
            if first_send.without_ledger(
                audit, admissions, plan, transport=self.services.transport, events=self.events
            ):
                return True
            self.unwatch()
            return False
        try:
            self.services.advancer.begin(plan, refusals, copy=body)
        except Exception as error:  # noqa: BLE001 - recorded: the sweep sends it once it can
            log.warning("batch %s: its first stage waits for the sweep: %s", self.batch.id, error)
        return True

    def attach(self) -> None:
        self.inbox = self.services.transport.watch(self.batch.id)
        row = self.services.approvals.ledger.batch(self.batch.id)
        self.deadline = row.deadline_at.timestamp() if row and row.deadline_at else None
        self.tokens = {name: getattr(row, name, None) for name in TOKENS}
        for result in self.services.approvals.ledger.ends(self.batch.id).values():
            self.events.end(result)
        for notice in self._ledger_notices():
            self.events.notice(notice)

    def follow_kept(self, record: BatchRecord) -> None:
        """Follow a batch whose record is kept in Redis, not yet in the ledger:
        the ends decided at its submit are in the record, the rest are
        published (and read from the results' hash: some may have been
        published before this process watched)."""
        self.inbox = self.services.transport.watch(self.batch.id)
        self.inbox.gap = True
        deadline = record.columns.get("deadline_at")
        self.deadline = deadline.timestamp() if deadline is not None else None
        self.tokens = {name: record.columns.get(name) for name in TOKENS}
        for end in record.ends:
            self.events.end(end.result)

    def look(self, *, thorough: bool) -> None:
        """Hand on what has arrived, without waiting: ends in the model's order,
        a notice as an `ApprovalRequested`. `thorough` (the follower's look now
        and then): also end the batch past its deadline if no worker's sweep
        has, and read the ledger's ends every few looks (Redis may have lost one)."""
        waiting = self.events.open_calls()
        arrived = self.inbox.results(waiting, 0)
        for result in sorted(arrived, key=lambda r: self.order[r.call_id]):
            if result.status is Status.awaiting_approval:
                self.events.notice(requested(result))
            else:
                self.events.end(result)
        if not thorough or self.done:
            return
        self._looks += 1
        if self.past_deadline():
            self._past_deadline()  # the sweep's job, unless no worker is alive to do it
        if self._looks % LEDGER_EVERY == 0:  # announced while the channel was away
            for call_id, result in self._ledger_ends().items():
                if call_id in waiting:
                    self.events.end(result)
            for notice in self._ledger_notices():
                self.events.notice(notice)  # dropped if said already or ended

    def past_deadline(self) -> bool:
        return self.deadline is not None and clock.now() >= self.deadline + DEADLINE_GRACE

    def seconds_to_deadline(self) -> float | None:
        """Until the moment a follower ends the batch itself; None: no deadline."""
        return None if self.deadline is None else self.deadline + DEADLINE_GRACE - clock.now()

    def unwatch(self) -> None:
        self.services.transport.unwatch(self.batch.id)

    def _ledger_ends(self) -> dict[str, ToolResult]:
        try:
            return self.services.approvals.ledger.ends(self.batch.id)
        except LedgerUnavailable:  # Redis still brings what workers announce
            return {}

    def _ledger_notices(self) -> list[ApprovalRequested]:
        """The calls the ledger says wait for an answer: their notice is only
        published, so one sent while this process's channel was down is read here."""
        try:
            rows = self.services.approvals.pending(self.batch.id)
        except LedgerUnavailable:
            return []
        return [ApprovalRequested(call_id=r.call_id, tool=r.tool, reason=r.reason) for r in rows]

    def _past_deadline(self) -> None:
        try:
            self.services.advancer.advance(self.batch.id)
        except Exception as error:  # noqa: BLE001 - the next wake tries again
            log.warning("batch %s: could not end it at its deadline: %s", self.batch.id, error)

    def end_now(self) -> None:
        """The caller stopped waiting: the batch's open calls end as at its deadline."""
        try:
            self.services.advancer.advance(self.batch.id, expire=True)
        except Exception as error:  # noqa: BLE001 - the sweep ends them at the deadline
            log.warning("batch %s: could not end its open calls: %s", self.batch.id, error)

    def cancel(self, *, by: str) -> None:
        self.services.advancer.cancel(self.batch.id, by=by)


def requested(notice: ToolResult) -> ApprovalRequested:
    """The wire's notice (a `ToolResult` whose status is `awaiting_approval`,
    made by `endings.awaiting_approval`) as the event a handle yields."""
    reason = notice.model_message.removeprefix(f"{notice.tool}: ")
    reason = reason.removeprefix("awaiting approval: ")
    return ApprovalRequested(call_id=notice.call_id, tool=notice.tool, reason=reason)
