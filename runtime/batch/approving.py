"""The approval steps of an advance (docs/architecture.md, "A batch the cluster
owns"): the answers a batch's calls have, read from the ledger (an expired one
expired there first); a call that must ask, asked; and an approved call,
admitted again with the arguments its approver gave, signed with the approval
and sent."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from runtime import clock
from runtime.batch.notifying import Notifying
from runtime.batch.plan import BatchPlan
from runtime.batch.progress import Answer, End
from runtime.batch.signer import Signer
from runtime.gate.admission import Admitted, admit
from runtime.gate.decision import Decision
from runtime.gate.policy import Policy
from runtime.ledger.approvals import Approvals, sealed
from runtime.ledger.tables import utc_now
from runtime.registry.capabilities import Registry
from runtime.results import endings
from runtime.transport.base import BatchState, Queue
from runtime.types import ToolCall

log = logging.getLogger("toolrun.batch")


class Approving:
    def __init__(
        self,
        *,
        approvals: Approvals,
        registry: Registry,
        key: bytes,
        queue: Queue,
        state: BatchState,
        conclude: Callable[[BatchPlan, End, Decision | None], bool],
        notifying: Notifying | None = None,
    ) -> None:
        """`conclude`: how an end is written (`Advancer.conclude`); `notifying`:
        who is told when a call starts to wait (None: nobody)."""
        self.approvals, self.registry, self.key = approvals, registry, key
        self.queue, self.state, self.conclude = queue, state, conclude
        self.notifying = notifying

    def answers(self, plan: BatchPlan, now: float) -> dict[str, Answer]:
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

    def ask(self, plan: BatchPlan, call_id: str) -> None:
        planned, call = plan.calls[call_id], plan.call(call_id)
        timeout = max(0.0, min(plan.approval_timeout, plan.deadline - clock.now()))
        stored = self.approvals.request(
            plan.batch.id,
            call_id,
            tool=planned.tool,
            arguments=call.arguments,
            reason=planned.reason,
            timeout=timeout,
        )
        if stored:  # this process asked, and no other: it alone tells the notifiers
            if self.notifying is not None:
                arguments = self.approvals.ledger.redactor.redact(call.arguments)
                expires = utc_now() + timedelta(seconds=timeout)
                self.notifying.tell(plan, call_id, arguments, expires)
            notice = endings.awaiting_approval(call_id, planned.tool, planned.reason)
            self.state.announce(plan.batch.id, notice, reply_to=plan.reply_to)

    def run(self, plan: BatchPlan, call_id: str, *, again: bool = False) -> bool:
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
        # The gate may allow what a pre hook asked about: the approval is still the person's.
        by = admitted.decision.source.removeprefix("approval:")
        if not admitted.decision.source.startswith("approval:"):
            by = row.answered_by or "unknown"
        message = signer.message(
            admitted,
            by,
            stage=(stage, size, last),
            approval_ms=waited,
        )
        self.queue.post([message], parallel=plan.calls[call_id].read)
        return False
