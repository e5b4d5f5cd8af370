"""The one place where a tool runs: check the message again, claim the call,
invoke the tool, record the end.

Exceptions become results here (and in `invocation`, which this calls) and
nowhere else. The worker trusts nothing it receives: the message must carry a
valid signature, the call is admitted again under the policy it was submitted
with, a call that needs asking runs only with its approval, and a
non-idempotent side effect runs only if this delivery claims it in the ledger.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from runtime.errors import LedgerUnavailable, StateUnavailable
from runtime.execution import budgets_at_start_and_end, limits_at_start, outcomes, time_limits
from runtime.execution.fence import fenced
from runtime.execution.handover import Previous, claim_after, settle
from runtime.execution.invocation import invoke
from runtime.execution.outcomes import Outcome
from runtime.flow.budgets import Spending
from runtime.gate.admission import Admitted, Refused, admit, refuse
from runtime.gate.decision import Decision
from runtime.gate.hooks import post as post_hooks
from runtime.gate.policy import Policy
from runtime.ledger.claims import Start
from runtime.ledger.ends import CallEnd
from runtime.ledger.rows import event_fields
from runtime.ledger.store import EventKind, Ledger
from runtime.ledger.tables import utc_now
from runtime.registry.capabilities import Registry
from runtime.results import endings
from runtime.settings import Settings
from runtime.transport import signing
from runtime.transport.base import BatchState, Copies, Leases, Look, ResultBus, SendMarks
from runtime.types import CallMessage, Risk, ToolCall, ToolResult

log = logging.getLogger("toolrun.executor")


def execute(
    message: CallMessage,
    *,
    registry: Registry,
    ledger: Ledger,
    settings: Settings,
    key: bytes,
    worker: str | None = None,
    state: BatchState | None = None,
    previous: Previous | None = None,
    defer: bool = False,
) -> Outcome:
    """Check a task message again and run its call; never raises for anything
    the tool, its input or the message does. `state` says whether the batch
    was cancelled and finds results already published. In a chain,
    `previous` is the step before, whose end is written with this step's
    claim if it gets that far, else first; `defer` leaves this step's end
    unwritten, if it ran under a claim, for the step after it."""
    meta = {"worker": worker, "attempts": 1}
    call = ToolCall(id=message.call_id, name=message.tool, arguments=message.arguments)
    if not signing.genuine(message, key):
        # Not sent by a client holding the key, or altered on the way: never run.
        decision = Decision.deny(
            "the task message is unsigned or its signature does not match; it was not run",
            rule="signature",
            source="worker",
        )
        settle(previous, ledger)  # its end comes before anything of this call
        return outcomes.refusal(
            ledger, message, refuse(call, registry.get(call.name), decision), meta
        )
    admission = admit(
        call,
        registry=registry,
        mode=message.mode,
        max_argument_bytes=settings.max_argument_bytes,
        workspace=Path(message.workspace),
        policy=Policy.from_snapshot(message.policy),
        approved_by=message.approved_by,
        to_run=True,
    )
    spending = Spending.from_snapshot(message.policy.get("usage"))
    if not isinstance(admission, Refused):  # time or money may have run out since admission
        held = budgets_at_start_and_end.hold(
            [admission], spending, state, message.batch_id, to_run=True
        )
        (admission,) = held
    taking = None  # its rates' hits and caps' slots ("Flow control"): riding its look
    if isinstance(admission, Admitted):
        lease = time_limits.hard_limit(message.tool, registry, settings) + settings.lease_seconds
        taking = limits_at_start.entering(admission, message, state, lease=lease)
        if taking is not None and _claims(admission):  # its claim is the ledger's: no look
            admission, taking = taking.judged(None), None
    if isinstance(admission, limits_at_start.Delayed):
        settle(previous, ledger)
        return Outcome(admission.result, False)
    claimed = isinstance(admission, Admitted) and _claims(admission)
    if not claimed:  # only a claim writes it with this call's first row
        settle(previous, ledger)
    if isinstance(admission, Refused):
        return outcomes.refusal(ledger, message, admission, meta)
    if claimed:
        outcome = _claimed(
            admission, message, ledger, settings, worker, state, key, previous, defer
        )
    else:
        outcome = _at_least_once(admission, message, ledger, settings, worker, state, key, taking)
    if outcome.ended is not False:  # this delivery ran it: count what it spent
        budgets_at_start_and_end.charge(outcome.result, spending, state, message.batch_id)
    return outcome


def _unlook(state: SendMarks, message: CallMessage) -> None:
    try:
        state.unlook(message.batch_id, message.call_id)
    except StateUnavailable as error:  # its lease lapses; its delivery stays counted
        log.warning("%s waits for its limit, its look kept: %s", message.call_id, error)


def _claims(admission: Admitted) -> bool:
    return admission.spec.risk is not Risk.read and not admission.spec.idempotent


def _at_least_once(
    admission: Admitted,
    message: CallMessage,
    ledger: Ledger,
    settings: Settings,
    worker: str | None,
    state: BatchState | None,
    key: bytes,
    taking: limits_at_start.Entering | None = None,
) -> Outcome:
    """A read or an idempotent call: safe to run again, so nothing is claimed.
    Its deliveries are counted in Redis, and its started, retried and finished
    rows are written together once it ends: one ledger transaction per call.
    (So the ledger shows such a call once it has ended; a redelivered one,
    whose first worker was lost, shows its start at once.) `taking`: its
    limits' take, riding the look; a call that must wait takes the look back."""
    call_id, tool = message.call_id, admission.spec.name
    look = Look(cancelled=False, delivery=1, result=None)
    if state is not None:
        try:
            look = state.look(message.batch_id, call_id, hold=settings.lease_seconds, rider=taking)
        except StateUnavailable as error:  # Redis is down: publishing the result will wait for it
            log.warning("cannot look at %s before running it: %s", call_id, error)
    meta = {"worker": worker, "attempts": look.delivery}
    if taking is not None:
        verdict = taking.judged(None) if taking.verdict is None else taking.verdict
        if isinstance(verdict, limits_at_start.Delayed):
            _unlook(state, message)
            return Outcome(verdict.result, False)
        if isinstance(verdict, Refused):
            return outcomes.refusal(ledger, message, verdict, meta)
    if look.result is not None:  # a redelivered message: the call has ended already
        return Outcome(look.result, False)
    if look.cancelled:
        cancelled = endings.cancelled_before_start(call_id, tool, **meta)
        return outcomes.record(ledger, message, cancelled, EventKind.cancelled)
    if look.delivery > settings.max_deliveries:
        given_up = endings.given_up(call_id, tool, look.delivery - 1, **meta)
        return outcomes.record(ledger, message, given_up)
    retries: list[dict] = []

    def retried(attempt: int, error: BaseException) -> None:
        reason = f"{type(error).__name__}: {error}"
        retries.append(
            event_fields(
                message.batch_id,
                call_id,
                EventKind.retried,
                worker=worker,
                attempt=attempt,
                reason=reason,
                redactor=ledger.redactor,
            )
        )

    started_at: datetime | None = utc_now()
    if look.delivery > 1:  # a redelivery: its start shows now, should this worker be lost too
        ledger.eventually(
            lambda: ledger.mark_started(
                message.batch_id, call_id, worker=worker, attempt=look.delivery
            )
        )
        started_at = None
    result = _invoke(admission, message, settings, ledger, worker, look.delivery, retried, key)
    end = CallEnd(
        message.batch_id, result, started_at=started_at, retries=retries, redactor=ledger.redactor
    )
    return outcomes.ending(ledger, message, result, end)


def _claimed(
    admission: Admitted,
    message: CallMessage,
    ledger: Ledger,
    settings: Settings,
    worker: str | None,
    state: BatchState | None,
    key: bytes,
    previous: Previous | None = None,
    defer: bool = False,
) -> Outcome:
    """A side effect that is not idempotent: it runs only if this delivery
    claims it in the ledger first, so it runs at most once."""
    call, spec, meta = admission.call, admission.spec, {"worker": worker, "attempts": 1}
    if state is not None and _cancelled(state, message.batch_id):
        settle(previous, ledger)
        cancelled = endings.cancelled_before_start(call.id, spec.name, **meta)
        return outcomes.record(ledger, message, cancelled, EventKind.cancelled)
    try:
        begun = claim_after(ledger, message, worker, previous)
    except LedgerUnavailable as error:  # fail closed; the end row of a call that did not run waits
        log.error("ledger unavailable before %s: %s", call.id, error)
        refused = endings.ledger_unavailable(call.id, call.name, **meta)
        return outcomes.later(ledger, message, refused)
    if begun.start is Start.cancelled:  # recorded in the ledger, whatever the flag said
        cancelled = endings.cancelled_before_start(call.id, spec.name, **meta)
        return outcomes.record(ledger, message, cancelled, EventKind.cancelled)
    if begun.start is Start.taken:
        # Another delivery holds the claim: while its lease is renewed it runs the
        # call; once it is not, the sweep ends the call (docs/architecture.md, "Leases").
        return Outcome(endings.running_elsewhere(call.id, spec.name, **meta), False)
    recall = (lambda b, c: _recall(state, b, c)) if state is not None else (lambda b, c: None)
    early = outcomes.early_end(begun, message, spec.name, worker, recall)
    if early is not None:
        if begun.start is Start.finished:
            return Outcome(early, False)
        return outcomes.record(ledger, message, early)
    if previous is None or previous.leased != call.id:  # else taken as the step before ended
        published = _hold(state, message, settings.lease_seconds)
    else:  # read in the round trip that took it, if that could carry it
        known, published = previous.published(call.id)
        if not known and state is not None:
            published = _recall(state, message.batch_id, call.id)
    if published is not None:  # told to its caller first: it never runs now
        return outcomes.published_first(ledger, state, message, published)

    def retried(attempt: int, error: BaseException) -> None:
        ledger.eventually(
            lambda: ledger.record_event(
                message.batch_id,
                call.id,
                EventKind.retried,
                worker=worker,
                attempt=attempt,
                reason=f"{type(error).__name__}: {error}",
            )
        )

    with fenced(state, message.batch_id, call.id, settings.lease_seconds):
        result = _invoke(admission, message, settings, ledger, worker, begun.delivery, retried, key)
    if defer:  # the next step's claim writes it
        return Outcome(result, None, deferred=True)
    return outcomes.record(ledger, message, result)  # publishing the end releases the lease


def _invoke(
    admission: Admitted,
    message: CallMessage,
    settings: Settings,
    ledger: Ledger,
    worker: str | None,
    delivery: int,
    retried: Callable[[int, BaseException], None],
    key: bytes,
) -> ToolResult:
    """The tool's result, with the policy's post hooks' notes and marks."""
    quiet = ledger.quiet
    began = time.monotonic()
    result = invoke(
        admission,
        message,
        settings,
        delivery=delivery,
        worker=worker,
        on_retry=retried,
        quiet=quiet,
    )
    return post_hooks.on_worker(
        result, message, admission.spec, settings, ledger, worker, key, began
    )


def _hold(state: Leases | None, message: CallMessage, seconds: float) -> ToolResult | None:
    """The claimed call's lease, which this worker's main process renews while
    it runs, and the end published for it, if any. With the state away it is
    taken at the first renewal; until then the claim is young enough to count
    as held."""
    if state is None:
        return None
    try:
        return state.hold(message.batch_id, message.call_id, seconds)
    except StateUnavailable as error:
        log.warning("cannot take the lease of %s: %s", message.call_id, error)
        return None


def _cancelled(state: Copies, batch_id: str) -> bool:
    """The batch's cancel flag; with the state away, not cancelled (the claim decides)."""
    try:
        return state.cancelled(batch_id)
    except StateUnavailable as error:
        log.warning("cannot read the cancel flag of batch %s: %s", batch_id, error)
        return False


def _recall(state: ResultBus, batch_id: str, call_id: str) -> ToolResult | None:
    """A result already published; with the state away, None (the ledger's row answers)."""
    try:
        return state.recall(batch_id, call_id)
    except StateUnavailable:
        return None
