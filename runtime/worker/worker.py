"""The worker's side of a call, whole: what a worker process does with a task
message from the moment the broker hands it over until the batch has moved on.

`run` decodes the message and has the executor check it again, claim or look,
invoke the tool and record its end (`runtime.execution.executor`); then, if
this delivery ended the call, `finish` publishes the end, hands a chain on to
its next step, and moves the batch on when this was its stage's last call.
`runtime.worker.orphans` ends a call whose pool process was killed at its
hard limit, or whose message the broker gave up on, and `sweep` is the
periodic look at open batches that one worker at a time takes.

The same object runs under Celery (`workers/tasks.py`, one per process) and on
the threads of the in-process transport (`runtime/transport/memory.py`): there is
no second copy of this logic (docs/architecture.md, "The worker").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from runtime import clock, logs, sessions, tracing
from runtime.assembly.parts import advancer
from runtime.errors import StateUnavailable
from runtime.execution import executor, time_limits
from runtime.execution.handover import Previous, settled_after
from runtime.gate.policy import org_notifiers
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import Ledger
from runtime.registry.capabilities import Registry
from runtime.settings import Settings
from runtime.transport import chain
from runtime.transport.base import BatchState, Queue
from runtime.transport.riding import Recalled
from runtime.types import CallMessage, ToolResult
from runtime.worker import chains
from runtime.worker.retaining import Retaining

log = logging.getLogger("toolrun.worker")
PUBLISH_PATIENCE = 30.0  # seconds a finished call's end waits for the state to come back
HAND_ON_PATIENCE = 30.0  # seconds a worker keeps trying to send a chain's next step
ORPHAN_PATIENCE = 1.0  # seconds a heartbeat waits for orphans it SIGKILLed to be gone


class Worker:
    def __init__(
        self,
        *,
        settings: Settings,
        registry: Registry,
        ledger: Ledger,
        key: bytes,
        queue: Queue,
        state: BatchState,
        name: str | None = None,
    ) -> None:
        self.settings, self.registry, self.ledger, self.key = settings, registry, ledger, key
        self.queue, self.state, self.name = queue, state, name
        self.advancer = advancer(
            settings,
            ledger=ledger,
            registry=registry,
            key=key,
            queue=queue,
            state=state,
            approvals=Approvals(ledger, key),
            notifiers=org_notifiers(settings),
        )
        self.publish_patience, self.hand_on_patience = PUBLISH_PATIENCE, HAND_ON_PATIENCE
        ledger.announced_by(self._announced)  # a kept end yields to the one published
        self._sweeping: str | None = None  # the sweep's holder while this worker sweeps
        self.retaining = Retaining(settings, ledger, key)  # retention, when set

    def run(
        self, raw: Any, *, name: str | None = None, on_step: Callable[[int], None] | None = None
    ) -> ToolResult | None:
        """Run one delivered task message to its end; the (first) call's
        result, or None for a message too malformed to name a call (there is
        nobody to answer). A chain's steps run here one after another, each
        checked, claimed, run and published as if it had come alone, for as
        long as the batch may go on (docs/architecture.md, "A chain in one
        task"); `on_step(index)` is told as each step begins (the Celery
        binding shows it to the worker's main process, which limits, renews
        and, if killed, ends that step)."""
        message = CallMessage.from_wire(raw)
        if message is None:
            log.error("malformed task message refused")
            return None
        worker = name or self.name
        step: CallMessage | None = message
        index, previous, first = 0, None, None
        while step is not None:
            if on_step is not None:
                on_step(index)
            outcome = self._execute(step, worker, previous, defer=bool(step.then))
            first = first or outcome.result
            following = chain.follow(step, outcome.result) if outcome.ended is not False else None
            previous = None
            if following is None:
                ended = self._settled(step, outcome)
                self.finish(
                    step,
                    outcome.result,
                    ended,
                    unrecorded=outcome.unrecorded,
                    closed=outcome.closed,
                )
            elif outcome.deferred:  # its end is written with the next step's claim
                published = self._publisher(step, outcome.result)
                previous = Previous(step.batch_id, outcome.result, published)
            else:
                self.publish(step, outcome.result, outcome.ended)
            if following is not None:  # its queue wait starts now, as if it were handed on
                following.sent_at = clock.now()
            step, index = following, index + 1
        return first

    def _execute(
        self, step: CallMessage, worker: str | None, previous: Previous | None, *, defer: bool
    ) -> executor.Outcome:
        """One step, its log lines and span its own; however it ends (an
        exception too), the step before has its end written and published."""
        redactor, arguments = self.ledger.redactor, self.settings.trace_arguments
        token = logs.enter_call(step.batch_id, step.call_id)
        try:
            with (
                settled_after(previous, self.ledger),
                tracing.call_span(
                    step, worker=worker, redactor=redactor, arguments=arguments
                ) as span,
            ):
                outcome = executor.execute(
                    step,
                    registry=self.registry,
                    ledger=self.ledger,
                    settings=self.settings,
                    key=self.key,
                    worker=worker,
                    state=self.state,
                    previous=previous,
                    defer=defer,
                )
                span.ended(outcome.result)
        finally:
            logs.leave_call(token)
        return outcome

    def _settled(self, step: CallMessage, outcome: executor.Outcome) -> bool | None:
        """Whether this delivery ended the call, its end written now if it was
        deferred for a next step that will not run."""
        if not outcome.deferred:
            return outcome.ended
        told: list[bool | None] = []
        Previous(step.batch_id, outcome.result, lambda ended, _: told.append(ended)).settle(
            self.ledger
        )
        return told[0]

    def _publisher(
        self, step: CallMessage, result: ToolResult
    ) -> Callable[[bool | None, str | None], Recalled | None]:
        return lambda ended, lease: self.publish(step, result, ended, lease=lease)

    def publish(
        self,
        message: CallMessage,
        result: ToolResult,
        ended: bool | None,
        *,
        lease: str | None = None,
    ) -> Recalled | None:
        """Publish a chain step's end, if this delivery ended it (or may have),
        and count it for its stage; the chain goes on in this task. `lease`:
        the next step, just claimed, whose lease is taken in the same round
        trip, where the end published for it, if any, is read too (returned;
        None, or not `known`: the next step reads it itself)."""
        seconds = self.settings.lease_seconds
        recalled = Recalled(message.batch_id, lease) if lease else None
        try:
            if ended is None and not self._staked(message, result):
                ended = False
            if ended is not False:
                held = (lease, seconds) if lease else None
                self.state.publish(
                    message.batch_id,
                    result,
                    reply_to=message.reply_to,
                    stage=message.stage,
                    patience=self.publish_patience,
                    hold=held,
                    rider=recalled,
                )
            elif recalled is not None:  # a lease taken alone
                recalled.result = self.state.hold(message.batch_id, lease, seconds)
                recalled.known = True
        except StateUnavailable as error:  # its row is kept: the sweep finds it ended
            log.error("the end of %s could not be published: %s", message.call_id, error)
        return recalled

    def finish(
        self,
        message: CallMessage,
        result: ToolResult,
        ended: bool | None,
        *,
        unrecorded: bool = False,
        closed: bool = False,
    ) -> None:
        """After a call's end: if this delivery ended it (or may have: the
        ledger was down, and no other end was stored first), publish it, hand
        its chain on, and move the batch on when it ended its stage's last
        call. Someone else's end was published by them. `closed`: the end's
        own transaction marked the batch ended (`CallEnd.close`); the plan's
        copy goes with the publish."""
        finishing = self.advancer.flow.finishing(message)  # its slots, its key's next reads
        if ended is None and not self._staked(message, result):
            ended = False
        if ended is False:
            if finishing is not None:
                finishing.landed(None)
            return
        batch_id = message.batch_id
        done = self.state.publish(  # the finish rides it: slots lapse if it is lost
            batch_id,
            result,
            reply_to=message.reply_to,
            stage=None if closed else message.stage,  # ended: nobody needs the count
            patience=self.publish_patience,
            rider=finishing,
            drop_plan=closed,
        )
        state, queue, patience = self.state, self.queue, self.hand_on_patience
        if chains.hand_on(
            message, result, state=state, queue=queue, ledger=self.ledger, patience=patience
        ):
            return  # the chain goes on: its next step's worker moves the batch on
        if closed or done is None or done < message.stage_size:
            return
        try:
            if message.last_stage:  # the batch may be over: marked here, not by the sweep
                if not unrecorded:  # else no batch row yet: its record's transaction ends it
                    self.advancer.close(batch_id)
            else:
                self.advancer.advance(batch_id)
        except Exception:  # noqa: BLE001 - the sweep moves it on
            log.exception("batch %s: could not start its next stage", batch_id)

    def _announced(self, batch_id: str, call_id: str) -> ToolResult | None:
        try:
            return self.state.recall(batch_id, call_id)
        except StateUnavailable:  # the row kept writes its own end
            return None

    def _staked(self, message: CallMessage, result: ToolResult) -> bool:
        """Whether an end that may have ended its call (its row waits for the
        ledger) is the first stored for it: only then is it published, and
        its row, once the ledger is back, writes the one stored
        (docs/architecture.md, "One end per call")."""
        patience = self.publish_patience
        return self.state.stake(message.batch_id, result, patience=patience)

    def hard_limit(self, raw: Any, *, alone: bool = False) -> float:
        """Seconds after which the pool process running `raw` is killed: for a
        chain, the sum of its steps' limits (each step has its own as well,
        `workers/request.py`); `alone`: its first step's only."""
        steps = 1 if alone else chain.length(raw)
        return sum(
            time_limits.hard_limit(
                CallMessage.tool_of(chain.step_of(raw, index)), self.registry, self.settings
            )
            for index in range(steps)
        )

    def sweep(self, holder: str, *, first: Callable[[], object] | None = None) -> bool:
        """Sweep if no other worker holds the sweep's lease (taking or renewing
        it); True if this one did. After the state lost what it held, every
        open batch is looked at, and what was lost is sent again. The holder
        keeps the lease while it lives: `beat` renews it during a long sweep,
        and a holder that dies leaves it to lapse (docs/architecture.md,
        "Leases")."""
        if not self.state.hold_sweep(holder, self.settings.lease_seconds):
            return False
        self._sweeping = holder
        try:
            if first is not None:
                first()
            self.advancer.sweep(everything=self.state.lost(holder))
            self.retaining.offer()
        finally:
            self._sweeping = None
        return True

    def stop_sweeping(self, holder: str) -> None:
        """Give the sweep's lease up at a warm shutdown: another worker takes it at once."""
        self.state.release_sweep(holder)

    def beat(self, running: list[Any]) -> None:
        """From the worker's main process, every quarter of a lease: renew the
        leases of the calls its processes are running (`running`: their task
        messages), and the sweep's while a sweep runs. A pool process that is
        stuck does not stop this; a dead worker stops it, and its leases
        lapse. Then the sessions dead pool processes on this host left die."""
        calls = [call for raw in running if (call := CallMessage.call_of(raw)) is not None]
        try:
            self.state.renew(calls, self.settings.lease_seconds)
            if (holder := self._sweeping) is not None:
                self.state.hold_sweep(holder, self.settings.lease_seconds)
        finally:
            # What dead pool processes of any worker on this host left (a worker
            # killed whole leaves unconfined commands running): killed within a
            # beat, before the lease of its call could be judged lost, with
            # Redis away too (docs/architecture.md, "Leases").
            sessions.end_orphans(patience=ORPHAN_PATIENCE)
