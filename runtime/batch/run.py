"""The batch's rules: admit every call, record the decisions, ask for
approvals, send each stage and collect its results, through a `Transport`
(docs/architecture.md, "The batch's rules on a transport").

It runs on a thread of the submitting process and ends every call exactly once:
with the worker's result, an early end, `skipped` after a failed ordered step,
`denied` when an approval is refused or times out, or `timeout`/`outcome_unknown`
when the batch's deadline passes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runtime.batch.audit import BatchAudit
from runtime.batch.planner import plan
from runtime.gate.admission import Admitted, Refused, admit, refuse
from runtime.gate.decision import Decision, Effect
from runtime.gate.policy import Policy
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import EventKind
from runtime.registry.capabilities import Registry
from runtime.results import endings
from runtime.transport.base import Inbox, Transport
from runtime.types import Batch, Risk, Status, ToolCall, ToolResult

log = logging.getLogger("toolrun.dispatcher")
WAKE_SECONDS = 1.0  # how often a waiting stage looks at its deadline and cancel flag
CANCEL_GRACE = 5.0  # how long a cancelled batch waits for calls already running
CHAIN_STEPS = 32  # ordered steps one chain carries at most
CHAIN_BYTES = 256 * 1024  # and their arguments' JSON at most: the chain's first message holds all


@dataclass(frozen=True)
class Services:
    """What every batch of one `Runtime` shares."""

    registry: Registry
    approvals: Approvals
    transport: Transport
    approval_timeout: float


class BatchRun:
    def __init__(
        self,
        batch: Batch,
        policy: Policy,
        services: Services,
        *,
        deadline: float,
        emit: Callable[[ToolResult], None],
        notify: Callable[[ToolResult], None],
    ) -> None:
        self.batch, self.policy, self.services = batch, policy, services
        self.audit = BatchAudit(services.approvals.ledger, batch, policy)
        self.deadline = deadline
        self.emit, self.notify = emit, notify
        self.done: dict[str, ToolResult] = {}
        self.approved_by: dict[str, str] = {}
        self.cancelled = False
        self.recorded: bool | None = None  # the batch's rows: not yet, written, or waiting
        self.sender = services.transport.sender(batch, policy)

    def end_now(self) -> None:
        """Bring the deadline forward: unfinished calls end at once."""
        self.deadline = min(self.deadline, time.monotonic())

    def cancel(self) -> None:
        """Cancelled (from any process): nothing more starts; calls already
        running get a short grace to end with their real result."""
        if not self.cancelled:
            self.cancelled = True
            self.deadline = min(self.deadline, time.monotonic() + CANCEL_GRACE)

    def _check_cancelled(self) -> bool:
        if not self.cancelled and self.services.transport.cancelled(self.batch.id):
            self.cancel()
        return self.cancelled

    def _over(self) -> bool:
        """Cancelled, or past a deadline that `end_now` brought forward while a
        call waited for its approval."""
        return self._check_cancelled() or time.monotonic() >= self.deadline

    def run(self) -> None:
        inbox = self.services.transport.watch(self.batch.id)  # before anything is sent
        try:
            # A cancel sent before the batch listened is not read here: the
            # workers read the flag before each call and end it `cancelled`.
            self._run(inbox)
        except Exception as error:  # noqa: BLE001 - the loop must get a result per call
            log.exception("batch %s failed in the dispatcher", self.batch.id)
            for call in self.batch.calls:
                self._end(endings.runtime_failed(call.id, call.name, error))
        finally:
            self.services.transport.unwatch(self.batch.id)

    def _admit(self, call: ToolCall, approved_by: str | None = None) -> Admitted | Refused:
        return admit(call, registry=self.services.registry, mode=self.batch.mode,
                     workspace=Path(self.batch.workspace), policy=self.policy,
                     approved_by=approved_by)  # fmt: skip

    def _run(self, inbox: Inbox) -> None:
        admissions = [self._admit(call) for call in self.batch.calls]
        if any(isinstance(admission, Refused) for admission in admissions):
            self._record(admissions)  # a refusal's result comes after its row
        for admission in admissions:
            if isinstance(admission, Refused):
                self._end(admission.result)
        failed: ToolCall | None = None
        stages = plan(admissions, _is_read)
        for index, stage in enumerate(stages):
            pending = [a for a in stage.calls if a.call.id not in self.done]
            if inbox.cancelled:
                self.cancel()
            if pending and self.cancelled:
                for admission in pending:
                    self._skip(admission.call, None)
                continue
            if not stage.parallel and failed and self.batch.on_error == "stop":
                for admission in pending:
                    self._skip(admission.call, failed)
                continue
            if time.monotonic() >= self.deadline:
                for admission in pending:
                    self._skip(admission.call, None)
                continue
            if not stage.parallel:
                self._record(admissions)  # a side effect's decision is written before it runs
            if self.recorded is False:
                pending = self._refuse_unrecorded(pending)
            sent = [a for a in pending if a.decision.effect is Effect.allow]
            chained = not stage.parallel and len(sent) == 1  # nothing of it waits to be asked
            steps = [*sent, *self._chained_after(stages, index, sent)] if chained else []
            if len(steps) > 1:
                self._run_chain(steps, inbox)
            else:
                self._send(sent)
            # Reads may run before their rows land (docs/architecture.md, "Semantics"): the batch's
            # rows are written while they run, and before any of their results is taken.
            self._record(admissions)
            for asking in (a for a in pending if a.decision.effect is Effect.ask):
                approved = self._ask(asking)
                if approved is not None:
                    self._send([approved])
                    sent.append(approved)
            self._wait([a.call.id for a in sent], inbox)
            head = stage.calls[0].call
            if not stage.parallel and not self.done[head.id].ok:
                failed = head
        self._record(admissions)

    def _record(self, admissions: list[Admitted | Refused]) -> None:
        """The batch's rows, once (`recorded`: False if the ledger was unavailable)."""
        if self.recorded is None:
            self.recorded = self.audit.admissions(admissions)

    def _ask(self, admission: Admitted) -> Admitted | None:
        """Wait for a human; the approved call (arguments validated again), or
        None once the call has ended denied."""
        call, spec = admission.call, admission.spec
        approvals = self.services.approvals
        try:
            approvals.request(self.batch.id, call.id, tool=spec.name, arguments=call.arguments,
                              reason=admission.decision.reason,
                              timeout=self.services.approval_timeout)  # fmt: skip
        except Exception as error:  # noqa: BLE001 - no stored request, nobody can answer
            log.error("approval request for %s failed: %s", call.id, error)
            return self._deny(admission, "the approval could not be stored, so nobody can answer")
        self.notify(endings.awaiting_approval(call.id, spec.name, admission.decision.reason))
        limit = min(self.deadline, time.monotonic() + self.services.approval_timeout)
        answer = approvals.wait(self.batch.id, call.id, deadline=limit, stop=self._over)
        if self.cancelled:
            self._skip(call, None)
            return None
        if answer.status == "denied":
            return self._deny(
                admission,
                f"the user ({answer.by}) refused it: {answer.reason or 'no reason given'}",
                rule="approval",
            )
        if answer.status != "approved":
            return self._deny(admission, "approval timed out", rule="approval")
        if answer.updated and answer.arguments is None:
            return self._deny(admission, "the approved arguments were lost; ask again")
        arguments = answer.arguments if answer.updated else call.arguments
        by = answer.by or "unknown"
        # Admitted again, as the worker will: updated arguments are checked like any others.
        again = self._admit(ToolCall(id=call.id, name=call.name, arguments=arguments), by)
        if isinstance(again, Refused):
            self._end(again.result)
            self.audit.end(again.result, again.event, again.decision)
            return None
        self.approved_by[call.id] = by
        return again

    def _deny(self, admission: Admitted, reason: str, rule: str = "approval") -> None:
        refused = refuse(
            admission.call, admission.spec, Decision.deny(reason, rule=rule, source="approval")
        )
        self._end(refused.result)
        self.audit.end(refused.result, EventKind.decision, refused.decision)

    def _refuse_unrecorded(self, pending: list[Admitted]) -> list[Admitted]:
        runnable = []
        for admission in pending:
            if admission.spec.risk is Risk.read:
                runnable.append(admission)
                continue
            result = endings.ledger_unavailable(admission.call.id, admission.spec.name)
            self._end(result)
            self.audit.end(result)  # waits in the buffer, after the batch's own rows
        return runnable

    def _chained_after(self, stages: list, index: int, head: list[Admitted]) -> list[Admitted]:
        """The ordered steps right after stage `index` that can ride in one chain
        with `head`: each allowed as it stands (no approval to wait for), and no
        more than a chain carries (its first message holds every step)."""
        steps, size = [], _size(head[0])
        for stage in stages[index + 1 :]:
            admission = stage.calls[0]
            if stage.parallel or not isinstance(admission, Admitted):
                break
            if admission.decision.effect is not Effect.allow or admission.call.id in self.done:
                break
            size += _size(admission)
            if len(steps) + 1 >= CHAIN_STEPS or size > CHAIN_BYTES:
                break
            steps.append(admission)
        return steps

    def _run_chain(self, steps: list[Admitted], inbox: Inbox) -> None:
        """Send ordered steps as one chain (each worker starts the next) and end
        each with its result; when the chain breaks (a failure under `stop`, a
        cancel), the steps it never reached end here."""
        self._send(steps, chained=True)
        ids = [step.call.id for step in steps]

        def broken() -> bool:
            for call_id in ids:
                result = self.done.get(call_id)
                if result is None:  # running or on its way: its worker answers, cancel or not
                    return False
                if result.status is Status.cancelled:
                    self.cancel()  # a worker saw the batch's cancel flag first
                    return True
                if not result.ok and self.batch.on_error == "stop":
                    return True
            return False

        # Past the deadline no step may start: the flag is up before the steps end.
        self._wait(ids, inbox, until=broken, on_deadline=self._stop_workers)
        failed = next((s.call for s in steps if s.call.id in self.done
                       and not self.done[s.call.id].ok), None)  # fmt: skip
        for step in steps:
            if step.call.id not in self.done:
                self._skip(step.call, None if self.cancelled else failed)

    def _stop_workers(self) -> None:
        try:
            self.services.transport.cancel(self.batch.id, by="deadline")
        except Exception as error:  # noqa: BLE001 - the steps still end here, at the deadline
            log.warning("batch %s: cannot stop its chain: %s", self.batch.id, error)

    def _send(self, admitted: list[Admitted], *, chained: bool = False) -> None:
        """Send calls to the workers; a call the broker never took before the
        deadline ends `error`, recorded so that a message that did get through
        finds it ended."""
        unsent = self.sender.send(admitted, self.approved_by, lambda: self.deadline,
                                  chained=chained)  # fmt: skip
        for admission in unsent:
            call, spec = admission.call, admission.spec
            result = endings.broker_unreachable(call.id, spec.name)
            self._end(result)
            self.audit.end(result)

    def _wait(
        self,
        call_ids: list[str],
        inbox: Inbox,
        until: Callable[[], bool] = lambda: False,
        on_deadline: Callable[[], None] = lambda: None,
    ) -> None:
        """Until each call has its result, `until()` is true, or the deadline
        ends the calls still open (after `on_deadline()`)."""
        waiting = set(call_ids) - set(self.done)
        while waiting and not until():
            now = time.monotonic()
            if now >= self.deadline:
                on_deadline()
                self._expire(waiting)
                return
            for result in inbox.results(waiting, min(WAKE_SECONDS, self.deadline - now)):
                if result.call_id in waiting:
                    waiting.discard(result.call_id)
                    self._end(result)
            if inbox.cancelled:
                self.cancel()

    def _expire(self, call_ids: set[str]) -> None:
        """The deadline passed: each sent call ends now, saying what is known."""
        for call in self.batch.calls:
            if call.id in call_ids:
                spec = self.services.registry.get(call.name)
                read = spec is not None and spec.risk is Risk.read
                result = endings.abandoned(call, read=read, cancelled=self.cancelled)
                self._end(result)
                self.audit.end(result)

    def _skip(self, call: ToolCall, failed: ToolCall | None) -> None:
        """Not run: an ordered step failed before it, or (`failed` None) the
        batch was cancelled or its deadline passed before the call's turn."""
        result, kind = endings.not_run(call, failed, cancelled=self.cancelled)
        self._end(result)
        self.audit.end(result, kind)

    def _end(self, result: ToolResult) -> None:
        if result.call_id in self.done:
            return
        self.done[result.call_id] = result
        self.emit(result)


def _size(admission: Admitted) -> int:
    return len(json.dumps(admission.call.arguments, default=str))


def _is_read(admission: Admitted | Refused) -> bool:
    return admission.spec is not None and admission.spec.risk is Risk.read
