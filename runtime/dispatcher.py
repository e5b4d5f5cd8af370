"""Drives one batch: admit every call, record the decisions, ask for approvals,
send each stage to its queue and collect results from the batch's channel.

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

import redis
from celery import Celery
from kombu.exceptions import OperationalError

from runtime import channel, results, signing
from runtime.admission import Admitted, Refused, admit, refuse
from runtime.approvals import Approvals
from runtime.audit import BatchAudit
from runtime.decision import Decision, Effect
from runtime.ledger import EventKind
from runtime.planner import plan
from runtime.policy import Policy
from runtime.redaction import redact
from runtime.registry import Registry
from runtime.types import Batch, CallMessage, Risk, Status, ToolCall, ToolResult

log = logging.getLogger("toolrun.dispatcher")
TASK = "toolrun.execute"
SWEEP_SECONDS = channel.SWEEP_SECONDS  # how often a waiting stage also reads the results hash
CANCEL_GRACE = 5.0  # how long a cancelled batch waits for calls already running
UNREACHABLE = (*channel.LOST, OperationalError)  # Redis down: kombu wraps its errors


@dataclass(frozen=True)
class Services:
    """What every batch of one `Runtime` shares."""

    registry: Registry
    approvals: Approvals
    app: Celery
    client: redis.Redis
    key: bytes
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

    def end_now(self) -> None:
        """Bring the deadline forward: unfinished calls end at once."""
        self.deadline = min(self.deadline, time.monotonic())

    def _cancel(self) -> None:
        """Cancelled (from any process): nothing more starts; calls already
        running get a short grace to end with their real result."""
        if not self.cancelled:
            self.cancelled = True
            self.deadline = min(self.deadline, time.monotonic() + CANCEL_GRACE)

    def _check_cancelled(self) -> bool:
        try:
            if not self.cancelled and self.services.client.exists(
                channel.cancel_key(self.batch.id)
            ):
                self._cancel()
        except channel.LOST as error:  # Redis down: nobody can have cancelled through it
            log.warning("batch %s: cannot read its cancel flag: %s", self.batch.id, error)
        return self.cancelled

    def run(self) -> None:
        listener = channel.Listener(self.services.client, self.batch.id)
        try:
            self._run(listener)
        except Exception as error:  # noqa: BLE001 - the loop must get a result per call
            log.exception("batch %s failed in the dispatcher", self.batch.id)
            for call in self.batch.calls:
                text = f"the runtime failed before this call ended ({type(error).__name__})"
                self._end(results.failure(call.id, call.name, Status.outcome_unknown, text))
        finally:
            listener.close()

    def _admit(self, call: ToolCall) -> Admitted | Refused:
        return admit(call, registry=self.services.registry, mode=self.batch.mode,
                     workspace=Path(self.batch.workspace), policy=self.policy)  # fmt: skip

    def _run(self, listener: channel.Listener) -> None:
        admissions = [self._admit(call) for call in self.batch.calls]
        ledger_ok = self.audit.admissions(admissions)
        for admission in admissions:
            if isinstance(admission, Refused):
                self._end(admission.result)
        failed: ToolCall | None = None
        for stage in plan(admissions, _is_read):
            pending = [a for a in stage.calls if a.call.id not in self.done]
            if pending and self._check_cancelled():
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
            if not ledger_ok:
                pending = self._refuse_unrecorded(pending)
            sent = [a for a in pending if a.decision.effect is Effect.allow]
            self._send(sent)
            for asking in (a for a in pending if a.decision.effect is Effect.ask):
                approved = self._ask(asking)
                if approved is not None:
                    self._send([approved])
                    sent.append(approved)
            self._wait([a.call.id for a in sent], listener)
            head = stage.calls[0].call
            if not stage.parallel and not self.done[head.id].ok:
                failed = head

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
        text = f"awaiting approval: {admission.decision.reason}"
        self.notify(results.failure(call.id, spec.name, Status.awaiting_approval, text))
        limit = min(self.deadline, time.monotonic() + self.services.approval_timeout)
        answer = approvals.wait(self.batch.id, call.id, deadline=limit,
                                stop=self._check_cancelled)  # fmt: skip
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
        if answer.updated:
            again = self._admit(ToolCall(id=call.id, name=call.name, arguments=answer.arguments))
            if isinstance(again, Refused):
                self._end(again.result)
                self.audit.end(again.result, again.event, again.decision)
                return None
            call, admission = again.call, again
        self.approved_by[call.id] = answer.by or "unknown"
        decision = Decision.allow(f"approved by {answer.by}", rule=admission.decision.rule,
                                  source=f"approval:{answer.by}")  # fmt: skip
        return Admitted(call, spec, admission.arguments, decision)

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
            text = "the audit ledger is unavailable, so this side effect was not run; retry later"
            result = results.failure(admission.call.id, admission.spec.name, Status.error, text,
                                     kind="ledger")  # fmt: skip
            self._end(result)
            self.audit.end(result)  # waits in the buffer, after the batch's own rows
        return runnable

    def _send(self, admitted: list[Admitted]) -> None:
        positions = {call.id: index for index, call in enumerate(self.batch.calls)}
        for admission in admitted:
            call, spec = admission.call, admission.spec
            message = CallMessage(
                batch_id=self.batch.id, call_id=call.id, tool=spec.name,
                arguments=call.arguments, mode=self.batch.mode, workspace=self.batch.workspace,
                position=positions[call.id], policy=self.policy.snapshot(),
                decision=admission.decision.as_dict(), approved_by=self.approved_by.get(call.id),
            ).model_dump(mode="json")  # fmt: skip
            message[signing.FIELD] = signing.sign(message, self.services.key)
            shown = {"batch_id": self.batch.id, "call_id": call.id, "tool": spec.name,
                     "arguments": redact(call.arguments)}  # fmt: skip
            self._publish(
                admission,
                args=[message],
                queue="reads" if spec.parallel else "effects",
                shadow=f"toolrun.{spec.name}",
                argsrepr=json.dumps([shown], default=str),
                kwargsrepr="{}",
                ignore_result=True,
            )

    def _publish(self, admission: Admitted, **task) -> None:
        """Send one call, trying again while the broker is unreachable (a Redis
        restart) until the deadline; then the call ends `error`, recorded in
        the ledger so that a message that did get through finds it ended."""
        while True:
            try:
                self.services.app.send_task(TASK, **task)
                return
            except UNREACHABLE as error:
                if time.monotonic() + channel.RECONNECT_SECONDS >= self.deadline:
                    break
                log.warning("batch %s: broker unreachable, sending again: %s", self.batch.id, error)
                time.sleep(channel.RECONNECT_SECONDS)
        call, spec = admission.call, admission.spec
        text = "the broker (Redis) could not be reached before the deadline; the call was not run"
        result = results.failure(call.id, spec.name, Status.error, text, kind="broker")
        self._end(result)
        self.audit.end(result)

    def _wait(self, call_ids: list[str], listener: channel.Listener) -> None:
        waiting = set(call_ids) - set(self.done)
        while waiting:
            now = time.monotonic()
            if now >= self.deadline:
                self._expire(waiting)
                return
            for result in listener.results(waiting, min(SWEEP_SECONDS, self.deadline - now)):
                if result.call_id in waiting:
                    waiting.discard(result.call_id)
                    self._end(result)
            if listener.cancelled:
                self._cancel()

    def _expire(self, call_ids: set[str]) -> None:
        """The deadline passed: each sent call ends now, saying what is known."""
        for call in self.batch.calls:
            if call.id not in call_ids:
                continue
            spec = self.services.registry.get(call.name)
            if self.cancelled and spec is not None and spec.risk is Risk.read:
                text = "cancelled: the batch was cancelled while this read ran; it was abandoned"
                result = results.failure(call.id, call.name, Status.cancelled, text)
            elif self.cancelled:
                text = ("the batch was cancelled while this call ran; the tool may or may not "
                        "have finished, check its effect before calling it again")  # fmt: skip
                result = results.failure(call.id, call.name, Status.outcome_unknown, text)
            elif spec is not None and spec.risk is Risk.read:
                text = "no result before the batch deadline; the read was abandoned"
                result = results.failure(call.id, call.name, Status.timeout, text)
            else:
                text = ("no result before the batch deadline; the tool may or may not have run, "
                        "check its effect before calling it again")  # fmt: skip
                result = results.failure(call.id, call.name, Status.outcome_unknown, text)
            self._end(result)
            self.audit.end(result)

    def _skip(self, call: ToolCall, failed: ToolCall | None) -> None:
        """Not run: an ordered step failed before it, or (`failed` None) the
        batch's deadline passed before its turn."""
        if failed is None and self.cancelled:
            text = "cancelled: the batch was cancelled before this call started; it did not run"
            result = results.failure(call.id, call.name, Status.cancelled, text)
            self._end(result)
            self.audit.end(result, EventKind.cancelled)
            return
        if failed is None:
            text = "skipped: the batch's deadline passed before this call's turn; it did not run"
        else:
            text = (f"skipped: call {failed.id} ({failed.name}) failed before it, so later "
                    "side effects of this batch were not run")  # fmt: skip
        result = results.failure(call.id, call.name, Status.skipped, text)
        self._end(result)
        self.audit.end(result, EventKind.skipped)

    def _end(self, result: ToolResult) -> None:
        if result.call_id in self.done:
            return
        self.done[result.call_id] = result
        self.emit(result)


def _is_read(admission: Admitted | Refused) -> bool:
    return admission.spec is not None and admission.spec.risk is Risk.read
