"""Carrying a batch on, from any process: read what the ledger and the
transport know, ask `progress.next_steps` what must happen, and do it: end
calls (through the ledger's compare-and-set, then announce), send what may
run, ask for approvals, run what was approved. Every step can be taken twice
by two processes at once and still happens once (docs/architecture.md, "A
batch the cluster owns").

Who calls it: the submitter (the first stage), the worker that ends a stage's
last call, whoever answers an approval or cancels, and the sweep that one
worker at a time runs every second (deadlines, expired approvals, messages
lost with Redis).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from pathlib import Path

from runtime.batch.flow import Flow
from runtime.batch.plan import BatchPlan
from runtime.batch.progress import RESEND_AFTER, Answer, End, Steps, View, next_steps
from runtime.batch.signer import Signer
from runtime.errors import LedgerRefused, LedgerUnavailable, StateUnavailable
from runtime.gate.admission import Admitted, admit
from runtime.gate.decision import Decision
from runtime.gate.policy import Policy
from runtime.ledger.approvals import Approvals, sealed
from runtime.ledger.batch_record import BatchRecord
from runtime.ledger.store import Ledger
from runtime.ledger.tables import EventKind, utc_now
from runtime.registry.capabilities import Registry
from runtime.results import endings
from runtime.transport.base import BatchState, Queue
from runtime.types import Risk, Status, ToolCall, ToolResult

log = logging.getLogger("toolrun.batch")
CLOSED_BY = "close"  # who cancelled a batch whose Runtime was closed
ROUNDS = 4  # passes of one advance: an end decided in one may let the next stage go
LEASE_SECONDS = 6.0  # a default: runtime.settings.Settings.lease_seconds


class Advancer:
    def __init__(
        self,
        *,
        ledger: Ledger,
        registry: Registry,
        key: bytes,
        queue: Queue,
        state: BatchState,
        approvals: Approvals,
        lease_seconds: float = LEASE_SECONDS,
        resend_after: float = RESEND_AFTER,
    ) -> None:
        self.ledger, self.registry, self.key = ledger, registry, key
        self.queue, self.state, self.approvals = queue, state, approvals
        self.lease_seconds, self.resend_after = lease_seconds, resend_after
        self.flow = Flow(state=state, queue=queue, registry=registry)  # "Flow control"

    def advance(self, batch_id: str, *, expire: bool = False) -> bool:
        """Carry the batch on as far as it can go now (`expire`: as if its
        deadline had passed); True once every call has ended."""
        try:
            body = self.ledger.plan(batch_id)
        except LedgerUnavailable:  # the copy Redis keeps lets reads and sends go on
            body = self.state.plan(batch_id)
        if body is None:
            return True  # ended (its plan is gone), or never recorded
        plan = BatchPlan.model_validate(body)
        for _ in range(ROUNDS):
            steps = next_steps(plan, self._view(plan, expire))
            ended = self._carry_out(plan, steps)
            if steps.finished:  # every call has its end now (those just written included)
                try:
                    if self.ledger.mark_ended(batch_id):  # else an end is still on its way
                        self._drop_plan(batch_id)
                except LedgerUnavailable:  # the sweep marks it once the ledger is back
                    pass
                return True
            if not ended:
                return False
        return False

    def begin(self, plan: BatchPlan, ends: dict[str, ToolResult]) -> None:
        """At submit: what is known needs no reading back."""
        view = View(
            ends=ends, sent={}, started=set(), approvals={}, cancelled_at=None, now=time.time()
        )
        steps = next_steps(plan, view)
        ended = self._carry_out(plan, steps)
        if steps.finished:
            if self.ledger.mark_ended(plan.batch.id):
                self._drop_plan(plan.batch.id)
        elif ended:
            self.advance(plan.batch.id)

    def _drop_plan(self, batch_id: str) -> None:
        """Redis's copy of an ended batch's plan goes with the ledger's row: it
        holds the arguments unredacted (docs/architecture.md, "Secrets")."""
        try:
            self.state.drop_plan(batch_id)
        except StateUnavailable:  # its TTL ends it
            pass

    def cancel(self, batch_id: str, *, by: str) -> None:
        """No call of the batch starts from now on; calls running get a short
        grace to end with their own result (the sweep ends them after it)."""
        self.state.cancel(batch_id, by=by)
        self.ledger.mark_cancelled(batch_id, by=by)
        self.advance(batch_id)

    def sweep(self, *, everything: bool = False) -> int:
        """Expired approvals, and every open batch past its deadline, cancelled,
        or old enough to have lost a message (`everything`: every open batch,
        after Redis lost its data). How many batches it looked at."""
        self._record_kept()
        expired = set()
        for batch_id, call_id in self.approvals.expired():
            self.approvals.expire(batch_id, call_id)
            expired.add(batch_id)
        now = utc_now()
        stale = (
            now if everything else now.fromtimestamp(time.time() - self.resend_after, now.tzinfo)
        )
        lapsed = self._lapsed()
        found = set(self.ledger.needing_attention(now=now, stale_before=stale)) | expired
        found |= {batch_id for batch_id, _ in lapsed} | self.flow.due()
        for batch_id in sorted(found):
            try:
                self.advance(batch_id)
            except Exception:  # noqa: BLE001 - one batch's fault must not stop the sweep
                log.exception("batch %s: the sweep could not carry it on", batch_id)
        for batch_id, call_id in lapsed:  # ended now; a live holder renews its lease again
            self.state.release(batch_id, call_id)
        return len(found)

    def conclude(self, plan: BatchPlan, end: End, decision: Decision | None = None) -> bool:
        """End a call, unless it has ended already: then nothing is written or
        announced. True if this was its end."""
        fields = decision.as_dict() if decision else {}
        won = self.ledger.record_result(
            plan.batch.id,
            end.result,
            kind=end.kind,
            unclaimed=end.only_if_pending,
            mode=plan.batch.mode.value,
            **fields,
        )
        if won:
            self.state.publish(plan.batch.id, end.result, reply_to=plan.reply_to)
        return won

    def _view(self, plan: BatchPlan, expire: bool) -> View:
        try:
            return self._known(plan, expire)
        except LedgerUnavailable as error:
            # Without the ledger, what Redis holds: ends announced (the buffered rows
            # land later), marks of what was sent. Side effects fail closed at the
            # worker, whose claim needs the ledger; reads go on.
            log.warning(
                "batch %s: ledger unavailable, going on from Redis: %s", plan.batch.id, error
            )
            now = max(time.time(), plan.deadline) if expire else time.time()
            return View(
                ends=self.state.ends(plan.batch.id),
                sent=self.state.sent(plan.batch.id),
                started=self.state.started(plan.batch.id),
                approvals={},
                cancelled_at=time.time() if self.state.cancelled(plan.batch.id) else None,
                now=now,
            )

    def _known(self, plan: BatchPlan, expire: bool) -> View:
        batch_id = plan.batch.id
        try:
            sent, started = self.state.sent(batch_id), self.state.started(batch_id)
            flagged = self.state.cancelled(batch_id)
        except StateUnavailable as error:  # what it held is unknown, the ledger still counts
            log.warning("batch %s: %s", batch_id, error)
            sent, started, flagged = {}, set(), False
        row = self.ledger.batch(batch_id)
        cancelled = row.cancelled_at.timestamp() if row and row.cancelled_at else None
        if cancelled is None and flagged:
            cancelled = self.ledger.mark_cancelled(batch_id, by="flag").timestamp()
        now = max(time.time(), plan.deadline) if expire else time.time()
        closed = row is not None and row.cancelled_by == CLOSED_BY
        # Ends announced but not yet in the ledger (rows waiting in a worker's buffer
        # while the ledger was locked) count too; the ledger's own wins over them.
        ends = {**self._announced(batch_id), **self.ledger.ends(batch_id)}
        running = self.ledger.claimed(batch_id)  # a redelivered read shows running too
        claimed = {c: at for c, at in running.items() if self._claims(plan, c)}
        taken = started - claimed.keys() - ends.keys()  # reads and idempotent calls running
        lost, stalled = self._gone(batch_id, claimed, taken)
        return View(
            ends=ends,
            sent=sent,
            started=started | set(running),
            approvals=self._answers(plan, now),
            cancelled_at=cancelled,
            now=now,
            cause="the runtime was closed" if closed else endings.CANCELLED,
            lost=lost,
            stalled=stalled,
            resend_after=self.resend_after,
        )

    def _claims(self, plan: BatchPlan, call_id: str) -> bool:
        """Whether a call of the plan runs only under a claim (a side effect
        that is not idempotent), so a lost worker's call ends, not runs again."""
        planned = plan.calls.get(call_id)
        spec = self.registry.get(planned.tool) if planned is not None else None
        return spec is not None and spec.risk is not Risk.read and not spec.idempotent

    def _gone(
        self, batch_id: str, claimed: dict[str, datetime], taken: set[str]
    ) -> tuple[frozenset[str], frozenset[str]]:
        """The calls whose worker is gone ("Leases"): claimed ones (lost: they
        end) and others a worker took (stalled: they run again). A lease ran
        out; or a claimed call has none, and neither its claim nor the state's
        last start is a lease's time old (its holder takes the lease right
        after the claim, and after a restart of the state renews it). With the
        state away, none."""
        try:
            holds = self.state.holds(batch_id, [*claimed, *taken])
            bare = any(call_id not in holds for call_id in claimed)
            reset = self.state.reset_at() if bare else 0.0
        except StateUnavailable:
            return frozenset(), frozenset()
        now = time.time()

        def lapsed(call_id: str, since: float) -> bool:
            if call_id in holds:
                return holds[call_id] <= now
            return now - max(since, reset) >= self.lease_seconds

        lost = frozenset(c for c, at in claimed.items() if lapsed(c, at.timestamp()))
        stalled = frozenset(c for c in taken if c in holds and lapsed(c, now))
        return lost, stalled

    def _record_kept(self) -> None:
        """Write the batch records kept while the ledger was away (their
        submitters may be gone); the ledger's compare-and-set makes a record
        its submitter wrote meanwhile a no-op (docs/architecture.md, "The
        ledger")."""
        try:
            kept = self.state.kept_records()
        except StateUnavailable:
            return
        for batch_id, text in kept.items():
            try:
                BatchRecord.loads(text).write(self.ledger)
            except LedgerRefused as error:  # it can never land
                log.error("batch %s: its kept record was refused: %s", batch_id, error)
            except LedgerUnavailable:
                return  # still away: the next sweep
            except (ValueError, KeyError, TypeError) as error:
                log.error("batch %s: its kept record is unreadable: %s", batch_id, error)
            self.state.drop_record(batch_id)

    def _lapsed(self) -> set[tuple[str, str]]:
        try:
            return self.state.lapsed(time.time())
        except StateUnavailable:
            return set()

    def _announced(self, batch_id: str) -> dict[str, ToolResult]:
        try:
            return self.state.ends(batch_id)
        except StateUnavailable:
            return {}

    def _answers(self, plan: BatchPlan, now: float) -> dict[str, Answer]:
        if not any(call.effect == "ask" for call in plan.calls.values()):
            return {}
        found = {}
        for call_id, row in self.approvals.of_batch(plan.batch.id).items():
            if row.status == "pending" and row.expires_at.timestamp() <= now:
                self.approvals.expire(plan.batch.id, call_id)
                row = self.approvals.get(plan.batch.id, call_id)
            found[call_id] = Answer(
                row.status,
                row.answered_by,
                row.answer,
                row.arguments_given,
                row.updated_arguments,
                sealed(self.key, row),
            )
        return found

    def _carry_out(self, plan: BatchPlan, steps: Steps) -> bool:
        """Do `steps`; True if an end was written (another pass may go further)."""
        ended = False
        for end in steps.ends:
            decision = _decision(end) if end.kind is EventKind.decision else None
            if (
                end.result.status is Status.denied
                and plan.calls[end.result.call_id].effect == "ask"
            ):
                self.approvals.expire(plan.batch.id, end.result.call_id)
            ended |= self.conclude(plan, end, decision)
        ended |= self._send(plan, steps.send)
        ended |= self._resend(plan, steps.resend)
        for call_id in steps.ask:
            self._ask(plan, call_id)
        for call_id in steps.run_approved:
            ended |= self._run_approved(plan, call_id)
        return ended

    def _send(self, plan: BatchPlan, groups: list[list[str]]) -> bool:
        """Send what may go now; True if a call was ended instead (refused at a limit)."""
        groups, ended = self.flow.gate(plan, groups, self.conclude)
        batch_id = plan.batch.id
        reads = [group[0] for group in groups if plan.calls[group[0]].read]
        ordered = [group for group in groups if not plan.calls[group[0]].read]
        marked = self.state.mark_sent(batch_id, reads + [c for g in ordered for c in g])
        reads = [call_id for call_id in reads if call_id in marked]
        if reads:
            self.queue.post([plan.calls[c].message for c in reads], parallel=True)
        for group in ordered:
            if group[0] in marked:
                self.queue.post(
                    [plan.calls[c].message for c in group], parallel=False, chained=len(group) > 1
                )
        return ended

    def _resend(self, plan: BatchPlan, call_ids: list[str]) -> bool:
        """Calls sent a while ago that no worker took: their message was lost.
        An allowed call's signed message goes again; an approved one is
        admitted, signed and sent again as when it was approved. True if an
        end was written (an approved call the gate now refuses)."""
        approved = [c for c in call_ids if plan.calls[c].effect == "ask"]
        allowed = [c for c in call_ids if plan.calls[c].effect == "allow"]
        for call_id in self.state.mark_sent(plan.batch.id, allowed, again=True):
            log.warning(
                "batch %s: %s was sent but never taken; sending it again", plan.batch.id, call_id
            )
            self.queue.post([plan.calls[call_id].message], parallel=plan.calls[call_id].read)
        ended = False
        for call_id in approved:
            ended |= self._run_approved(plan, call_id, again=True)
        return ended

    def _ask(self, plan: BatchPlan, call_id: str) -> None:
        planned, call = plan.calls[call_id], plan.call(call_id)
        timeout = max(0.0, min(plan.approval_timeout, plan.deadline - time.time()))
        stored = self.approvals.request(
            plan.batch.id,
            call_id,
            tool=planned.tool,
            arguments=call.arguments,
            reason=planned.reason,
            timeout=timeout,
        )
        if stored:
            notice = endings.awaiting_approval(call_id, planned.tool, planned.reason)
            self.state.announce(plan.batch.id, notice, reply_to=plan.reply_to)

    def _run_approved(self, plan: BatchPlan, call_id: str, *, again: bool = False) -> bool:
        """An approved call, admitted again with the arguments the approver gave
        (checked like any others), signed with the approval, and sent (`again`:
        sent before, its message lost). Only the approval row, as the ledger
        holds it under its seal, lets it go."""
        row = self.approvals.get(plan.batch.id, call_id)
        if row is None or row.status != "approved" or not sealed(self.key, row):
            return False  # what `next_steps` saw changed since: the next pass decides
        call = plan.call(call_id)
        arguments = row.arguments_given if row.updated_arguments else call.arguments
        admitted = admit(
            ToolCall(id=call.id, name=call.name, arguments=arguments),
            registry=self.registry,
            mode=plan.batch.mode,
            workspace=Path(plan.batch.workspace),
            policy=Policy.from_snapshot(plan.policy),
            approved_by=row.answered_by or "unknown",
        )
        if not isinstance(admitted, Admitted):  # a side effect sent before: only while unclaimed
            guard = again and not plan.calls[call_id].read
            return self.conclude(
                plan, End(admitted.result, admitted.event, guard), admitted.decision
            )
        if not self.state.mark_sent(plan.batch.id, [call_id], again=again):
            return False
        if again:
            log.warning(
                "batch %s: %s was approved and sent but never taken; sending it again",
                plan.batch.id,
                call_id,
            )
        stage = plan.calls[call_id].stage
        size = sum(plan.calls[c].effect != "refused" for c in plan.stages[stage].calls) or 1
        last = stage == len(plan.stages) - 1
        signer = Signer(
            self.key,
            plan.batch,
            plan.policy,
            reply_to=plan.reply_to,
            traceparent=plan.traceparent,
        )
        waited = None
        if row.answered_at is not None:  # the call's usage counts its wait for the answer
            waited = round((row.answered_at - row.requested_at).total_seconds() * 1000, 3)
        message = signer.message(
            admitted,
            admitted.decision.source.removeprefix("approval:"),
            stage=(stage, size, last),
            approval_ms=waited,
        )
        self.queue.post([message], parallel=plan.calls[call_id].read)
        return False


def _decision(end: End) -> Decision:
    reason = end.result.model_message.removeprefix("denied: ")
    return Decision.deny(reason, rule="approval", source="approval")
