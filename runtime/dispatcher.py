"""Drives one batch: admit every call, record the decisions, send each stage to
its queue and collect results from the batch's channel, stage after stage.

It runs on a thread of the submitting process and ends every call exactly once:
with the worker's result, an early end, `skipped` after a failed ordered step,
or `timeout`/`outcome_unknown` when the batch's deadline passes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import redis
from celery import Celery

from runtime import channel, results
from runtime.admission import Admitted, Refused, admit
from runtime.errors import LedgerUnavailable
from runtime.ledger import EventKind, EventRow, Ledger
from runtime.permissions import Decision
from runtime.planner import Stage, plan
from runtime.redaction import redact
from runtime.registry import Registry
from runtime.types import Batch, CallMessage, Risk, Status, ToolCall, ToolResult

log = logging.getLogger("toolrun.dispatcher")
TASK = "toolrun.execute"
SWEEP_SECONDS = 1.0  # how often a waiting stage also reads the results hash


class BatchRun:
    def __init__(
        self,
        batch: Batch,
        *,
        registry: Registry,
        ledger: Ledger,
        app: Celery,
        client: redis.Redis,
        deadline: float,
        emit: Callable[[ToolResult], None],
    ) -> None:
        self.batch = batch
        self.registry = registry
        self.ledger = ledger
        self.app = app
        self.client = client
        self.deadline = deadline
        self.emit = emit
        self.done: dict[str, ToolResult] = {}

    def end_now(self) -> None:
        """Bring the deadline forward: unfinished calls end at once."""
        self.deadline = min(self.deadline, time.monotonic())

    def run(self) -> None:
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(channel.key(self.batch.id))
        try:
            self._run(pubsub)
        except Exception as error:  # noqa: BLE001 - the loop must get a result per call
            log.exception("batch %s failed in the dispatcher", self.batch.id)
            for call in self.batch.calls:
                text = f"the runtime failed before this call ended ({type(error).__name__})"
                self._end(results.failure(call.id, call.name, Status.outcome_unknown, text))
        finally:
            pubsub.close()

    def _run(self, pubsub) -> None:
        workspace = Path(self.batch.workspace)
        admissions = [
            admit(call, registry=self.registry, mode=self.batch.mode, workspace=workspace)
            for call in self.batch.calls
        ]
        ledger_ok = self._record_admissions(admissions)
        for admission in admissions:
            if isinstance(admission, Refused):
                self._end(admission.result)
        failed: ToolCall | None = None
        for stage in plan(admissions, _is_read):
            pending = [a for a in stage.calls if a.call.id not in self.done]
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
            self._send(pending)
            self._wait([a.call.id for a in pending], pubsub)
            head = stage.calls[0].call
            if not stage.parallel and not self.done[head.id].ok:
                failed = head

    def _record_admissions(self, admissions: list[Admitted | Refused]) -> bool:
        """Batch row, call rows and one decision row per call, before anything
        runs. A refused call's one row is its end, with the decision that ended
        it. False if the ledger is unavailable: side effects then do not run."""
        mode = self.batch.mode.value
        rows = [
            EventRow(
                batch_id=self.batch.id,
                call_id=admission.call.id,
                kind=EventKind.decision.value,
                mode=mode,
                effect=admission.decision.effect.value,
                rule=admission.decision.rule,
                reason=admission.decision.reason,
            )
            for admission in admissions
            if isinstance(admission, Admitted)
        ]
        risks = {a.call.id: a.spec.risk.value if a.spec else None for a in admissions}
        try:
            self.ledger.record_batch(self.batch, risks=risks)
            self.ledger.record_many(rows)
            for refused in admissions:
                if isinstance(refused, Refused):
                    self.ledger.record_result(
                        self.batch.id,
                        refused.result,
                        kind=refused.event,
                        mode=mode,
                        **_decision_fields(refused.decision),
                    )
        except LedgerUnavailable as error:
            log.error("ledger unavailable for batch %s: %s", self.batch.id, error)
            return False
        return True

    def _refuse_unrecorded(self, pending: list[Admitted]) -> list[Admitted]:
        runnable = []
        for admission in pending:
            if admission.spec.risk is Risk.read:
                runnable.append(admission)
                continue
            text = "the audit ledger is unavailable, so this side effect was not run; retry later"
            self._end(results.failure(admission.call.id, admission.spec.name, Status.error, text))
        return runnable

    def _send(self, pending: list[Admitted]) -> None:
        positions = {call.id: index for index, call in enumerate(self.batch.calls)}
        for admission in pending:
            call, spec = admission.call, admission.spec
            message = CallMessage(
                batch_id=self.batch.id,
                call_id=call.id,
                tool=spec.name,
                arguments=call.arguments,
                mode=self.batch.mode,
                workspace=str(Path(self.batch.workspace).resolve()),
                position=positions[call.id],
            )
            shown = redact(
                {
                    "batch_id": self.batch.id,
                    "call_id": call.id,
                    "tool": spec.name,
                    "arguments": call.arguments,
                }
            )
            self.app.send_task(
                TASK,
                args=[message.model_dump(mode="json")],
                queue="reads" if spec.parallel else "effects",
                shadow=f"toolrun.{spec.name}",
                argsrepr=json.dumps([shown], default=str),
                kwargsrepr="{}",
                ignore_result=True,
            )

    def _wait(self, call_ids: list[str], pubsub) -> None:
        waiting = set(call_ids) - set(self.done)
        last_sweep = time.monotonic()
        while waiting:
            now = time.monotonic()
            if now >= self.deadline:
                self._expire(waiting)
                return
            message = pubsub.get_message(timeout=min(SWEEP_SECONDS, self.deadline - now))
            if message and message["type"] == "message":
                result = ToolResult.model_validate_json(message["data"])
                if result.call_id in waiting:
                    waiting.discard(result.call_id)
                    self._end(result)
            if time.monotonic() - last_sweep >= SWEEP_SECONDS:
                last_sweep = time.monotonic()
                for result in channel.stored(self.client, self.batch.id, sorted(waiting)):
                    waiting.discard(result.call_id)
                    self._end(result)

    def _expire(self, call_ids: set[str]) -> None:
        """The deadline passed: each sent call ends now, saying what is known."""
        for call in self.batch.calls:
            if call.id not in call_ids:
                continue
            spec = self.registry.get(call.name)
            if spec is not None and spec.risk is Risk.read:
                text = "no result before the batch deadline; the read was abandoned"
                self._end(results.failure(call.id, call.name, Status.timeout, text))
            else:
                text = (
                    "no result before the batch deadline; the tool may or may not have run, "
                    "check its effect before calling it again"
                )
                self._end(results.failure(call.id, call.name, Status.outcome_unknown, text))
        self._record_late(call_ids)

    def _record_late(self, call_ids: set[str]) -> None:
        try:
            for call_id in call_ids:
                self.ledger.record_result(self.batch.id, self.done[call_id])
        except LedgerUnavailable as error:
            log.error("ledger unavailable for batch %s: %s", self.batch.id, error)

    def _skip(self, call: ToolCall, failed: ToolCall | None) -> None:
        """Not run: an ordered step failed before it, or (`failed` None) the
        batch's deadline passed before its turn."""
        if failed is None:
            text = "skipped: the batch's deadline passed before this call's turn; it did not run"
        else:
            text = (
                f"skipped: call {failed.id} ({failed.name}) failed before it, so later "
                "side effects of this batch were not run"
            )
        result = results.failure(call.id, call.name, Status.skipped, text)
        self._end(result)
        try:
            self.ledger.record_result(self.batch.id, result, kind=EventKind.skipped)
        except LedgerUnavailable as error:
            log.error("ledger unavailable for batch %s: %s", self.batch.id, error)

    def _end(self, result: ToolResult) -> None:
        if result.call_id in self.done:
            return
        self.done[result.call_id] = result
        self.emit(result)


def _decision_fields(decision: Decision | None) -> dict[str, str]:
    if decision is None:
        return {}
    return {"effect": decision.effect.value, "rule": decision.rule, "reason": decision.reason}


def _is_read(admission: Admitted | Refused) -> bool:
    return admission.spec is not None and admission.spec.risk is Risk.read


__all__ = ["BatchRun", "Stage"]
