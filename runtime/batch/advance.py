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

from runtime import clock, tracing
from runtime.batch import liveness
from runtime.batch.approving import Approving
from runtime.batch.limits_at_send import Flow
from runtime.batch.notifying import Notifying
from runtime.batch.plan import BatchPlan
from runtime.batch.progress import RESEND_AFTER, End, Steps, View, next_steps
from runtime.batch.renotifying import AFTER, Renotifying
from runtime.batch.unrecorded import PATIENCE, UnrecordedEnds
from runtime.batch.view import Viewer
from runtime.errors import LedgerUnavailable, StateUnavailable
from runtime.gate.decision import Decision
from runtime.gate.notifiers import Notifier
from runtime.ledger.approvals import Approvals
from runtime.ledger.batches import Progress
from runtime.ledger.store import Ledger
from runtime.ledger.tables import EventKind, utc_now
from runtime.registry.capabilities import Registry
from runtime.transport.base import BatchState, PlanCopy, Queue
from runtime.types import Status, ToolResult

log = logging.getLogger("toolrun.batch")
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
        unrecorded_patience: float = PATIENCE,
        notifiers: tuple[Notifier, ...] = (),
        notification_resend_after: float = AFTER,
    ) -> None:
        self.ledger, self.registry, self.key = ledger, registry, key
        self.queue, self.state, self.approvals = queue, state, approvals
        self.flow = Flow(state=state, queue=queue, registry=registry)  # "Flow control"
        # rows lost with a killed worker's buffer
        self.unrecorded = UnrecordedEnds(ledger, patience=unrecorded_patience)
        self.approving = Approving(
            approvals=approvals,
            registry=registry,
            key=key,
            queue=queue,
            state=state,
            conclude=self.conclude,
            notifying=Notifying(notifiers, key=key, ledger=ledger) if notifiers else None,
        )
        self.renotifying = None  # lost approval notifications, sent again by the sweep
        if self.approving.notifying is not None:
            self.renotifying = Renotifying(
                self.approving.notifying, approvals, after=notification_resend_after
            )
        self.viewer = Viewer(
            ledger=ledger,
            registry=registry,
            state=state,
            unrecorded=self.unrecorded,
            approving=self.approving,
            lease_seconds=lease_seconds,
            resend_after=resend_after,
        )

    def advance(self, batch_id: str, *, expire: bool = False) -> bool:
        """Carry the batch on as far as it can go now (`expire`: as if its
        deadline had passed); True once every call has ended."""
        try:
            found: Progress | None = self.ledger.progress(batch_id, with_plan=True)
            body = found.plan
        except LedgerUnavailable:  # the copy Redis keeps lets reads and sends go on
            found, body = None, self.state.plan(batch_id)
        if body is None:
            return True  # ended (its plan is gone), or never recorded
        plan = BatchPlan.model_validate(body)
        for _ in range(ROUNDS):
            view = self.viewer.view(plan, expire, found)
            if not liveness.orphans_gone(view.lost):
                return False  # nothing is ended or sent while they may run: the next sweep
            steps = next_steps(plan, view)
            found = None  # the next pass reads again what this one changed
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

    def begin(
        self,
        plan: BatchPlan,
        ends: dict[str, ToolResult],
        *,
        copy: PlanCopy | None = None,
        record: str | bytes | None = None,
    ) -> None:
        """At submit: what is known needs no reading back. `copy`: the plan as
        JSON (its dict or its text), which the state keeps with the first
        marks of what is sent (one round trip: docs/architecture.md, "Round
        trips and memory"); `record`:
        the batch's record, kept the same way before anything is sent, for a
        batch sent before it is recorded ("Sent before recorded")."""
        view = View(
            ends=ends, sent={}, started=set(), approvals={}, cancelled_at=None, now=clock.now()
        )
        for result in ends.values():  # refused at the gate: recorded with the batch
            self._traced(plan, result, {})
        steps = next_steps(plan, view)
        if steps.ends or not steps.send:  # the copies first, as ever
            copy, record = self._keep(plan.batch.id, copy, record)
        ended = self._carry_out(plan, steps, copy, record)
        if steps.finished:
            if self.ledger.mark_ended(plan.batch.id):
                self._drop_plan(plan.batch.id)
        elif ended:
            self.advance(plan.batch.id)

    def close(self, batch_id: str) -> bool:
        """The worker that ended the last stage's last call: the batch is over
        if every call has its end in the ledger. One transaction and a Redis
        `DEL`, where an advance reads the ledger and Redis to find what the
        stage count already says; left so, the sweep came back for every
        batch (docs/architecture.md, "Round trips and memory"). False: a call
        is still open (its row waits in a buffer, its approval is pending) or
        the batch is not recorded yet ("Sent before recorded"); the record's
        own transaction, or the sweep, ends it then."""
        try:
            if not self.ledger.mark_ended(batch_id):
                return False
        except LedgerUnavailable:  # the sweep marks it once the ledger is back
            return False
        self._drop_plan(batch_id)
        return True

    def _keep(
        self, batch_id: str, copy: PlanCopy | None, record: str | bytes | None
    ) -> tuple[None, None]:
        """The plan's copy and the batch's record kept now, on their own."""
        if copy is not None:
            self.state.keep_plan(batch_id, copy)
        if record is not None:
            self.state.keep_record(batch_id, record)
        return None, None

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
        liveness.record_kept(self.state, self.ledger)
        now = utc_now()
        waited = clock.now() - self.viewer.resend_after
        stale = now if everything else now.fromtimestamp(waited, now.tzinfo)
        attention = self.ledger.needing_attention(now=now, stale_before=stale)
        for batch_id, call_id in attention.expired:
            self.approvals.expire(batch_id, call_id)
        if self.renotifying is not None:
            try:
                self.renotifying.sweep(now)
            except LedgerUnavailable:  # the next sweep looks again
                pass
        lapsed = liveness.lapsed(self.state)
        found = set(attention.batches) | {batch_id for batch_id, _ in attention.expired}
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
            self._traced(plan, end.result, fields, started=end.kind is EventKind.finished)
        return won

    def _traced(
        self, plan: BatchPlan, result: ToolResult, decision: dict, *, started: bool = False
    ) -> None:
        """The span of a call that no worker ran to its end (runtime/tracing.py)."""
        planned = plan.calls.get(result.call_id)
        if planned is not None and not decision and planned.effect == "refused":
            effect = "deny" if result.status is Status.denied else None
            decision = {"effect": effect, "reason": planned.reason, "rule": planned.rule}
        tracing.ended_span(
            plan.traceparent,
            plan.batch.id,
            planned.tool if planned else result.tool,
            result,
            decision,
            redactor=self.ledger.redactor,
            started=started,
        )

    def _carry_out(
        self,
        plan: BatchPlan,
        steps: Steps,
        copy: PlanCopy | None = None,
        record: str | bytes | None = None,
    ) -> bool:
        """Do `steps` (`copy` and `record`: the plan's copy and the batch's
        record, kept with the send marks); True if an end was written (another
        pass may go further)."""
        ended = False
        for end in steps.ends:
            decision = _decision(end) if end.kind is EventKind.decision else None
            if (
                end.result.status is Status.denied
                and plan.calls[end.result.call_id].effect == "ask"
            ):
                self.approvals.expire(plan.batch.id, end.result.call_id)
            ended |= self.conclude(plan, end, decision)
        ended |= self._send(plan, steps.send, copy, record)
        ended |= self._resend(plan, steps.resend)
        for call_id in steps.ask:
            self.approving.ask(plan, call_id)
        for call_id in steps.run_approved:
            ended |= self.approving.run(plan, call_id)
        return ended

    def _send(
        self,
        plan: BatchPlan,
        groups: list[list[str]],
        copy: PlanCopy | None = None,
        record: str | bytes | None = None,
    ) -> bool:
        """Send what may go now, each marked sent first by the gate (with the
        plan's copy and the record, in one round trip; a submit's reads under
        no limits ride the post's too); True if a call was ended instead
        (refused at a limit)."""
        reads = [group[0] for group in groups if plan.calls[group[0]].read]
        fresh = copy is not None and len(reads) == len(groups) and not plan.policy.get("limits")
        if fresh and reads and hasattr(self.queue, "post_marked"):
            messages = [plan.calls[c].message for c in reads]  # a submit's reads: one round trip
            self.queue.post_marked(plan.batch.id, messages, plan=copy, record=record)
            return False
        groups, ended = self.flow.gate(plan, groups, self.conclude, copy=copy, record=record)
        reads = [group[0] for group in groups if plan.calls[group[0]].read]
        if reads:
            self.queue.post([plan.calls[c].message for c in reads], parallel=True)
        for group in groups:
            if not plan.calls[group[0]].read:
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
            ended |= self.approving.run(plan, call_id, again=True)
        return ended


def _decision(end: End) -> Decision:
    reason = end.result.model_message.removeprefix("denied: ")
    return Decision.deny(reason, rule="approval", source="approval")
