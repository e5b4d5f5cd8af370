"""The batch's rules as one pure function: from its plan and what is known now
(ends, what was sent, what started, approvals, cancel, the clock) to what must
happen next. Whoever moves the batch on (the worker that ended a stage's last
call, an approver, the sweep, the submitter) runs it and carries out its
steps; every step is safe to take twice (docs/architecture.md, "A batch the
cluster owns").

Walking the stages in order: a stage whose calls have all ended is passed
(an ordered step that did not end `ok` fails the batch under `on_error="stop"`);
the first stage with an open call is where the batch stands, and nothing after
it moves until it has ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime.batch.plan import BatchPlan, PlannedCall
from runtime.ledger.tables import EventKind
from runtime.results import endings
from runtime.types import ToolCall, ToolResult

CANCEL_GRACE = 5.0  # seconds calls already running get after a cancel
RESEND_AFTER = 15.0  # seconds after which a sent call no worker took is sent again (a default)


@dataclass(frozen=True)
class Answer:
    """An approval's state as the advancer may trust it (its seal checked)."""

    status: str  # pending, approved, denied, expired
    by: str | None = None
    reason: str | None = None
    arguments: object = None  # the arguments to run with, if the approver changed them
    updated: bool = False
    sealed: bool = True


@dataclass(frozen=True)
class View:
    ends: dict[str, ToolResult]
    sent: dict[str, float]  # call id -> when it was last sent (epoch seconds)
    started: set[str]  # calls a worker has taken
    approvals: dict[str, Answer]
    cancelled_at: float | None
    now: float
    cause: str = endings.CANCELLED  # what a cancel's results say ended the batch
    lost: frozenset[str] = frozenset()  # claimed calls whose holder stopped renewing its lease
    stalled: frozenset[str] = frozenset()  # reads (and idempotent calls) likewise: run again
    resend_after: float = RESEND_AFTER


@dataclass(frozen=True)
class End:
    result: ToolResult
    kind: EventKind = EventKind.finished
    only_if_pending: bool = False  # a side effect: only while no worker has claimed it


@dataclass
class Steps:
    ends: list[End] = field(default_factory=list)
    send: list[list[str]] = field(default_factory=list)  # each list: one message or one chain
    resend: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    run_approved: list[str] = field(default_factory=list)
    finished: bool = False  # every call has ended


def next_steps(plan: BatchPlan, view: View) -> Steps:
    steps = Steps()
    ended = dict(view.ends)
    failed: ToolCall | None = None
    for index, stage in enumerate(plan.stages):
        open_ids = [call_id for call_id in stage.calls if call_id not in ended]
        if open_ids:
            for call_id in open_ids:
                end = _decide(plan, view, call_id, failed if not stage.parallel else None, steps)
                if end is not None:
                    steps.ends.append(end)
                    ended[call_id] = end.result
            if any(call_id not in ended for call_id in stage.calls):
                _chain(plan, steps, index, set(ended))
                return steps
        head = stage.calls[0]
        if not stage.parallel and failed is None and not ended[head].ok:
            failed = _call(plan, head) if plan.batch.on_error == "stop" else None
    steps.finished = True
    return steps


def _decide(
    plan: BatchPlan, view: View, call_id: str, failed: ToolCall | None, steps: Steps
) -> End | None:
    """The end of an open call decided now, or None (and maybe a step)."""
    planned, call = plan.calls[call_id], _call(plan, call_id)
    started = call_id in view.started
    sent = call_id in view.sent or started
    cancelled = view.cancelled_at is not None
    past = view.now >= plan.deadline
    if call_id in view.lost:  # its worker is gone (docs/architecture.md, "Leases")
        return End(endings.worker_lost(call.id, call.name))
    if started or (sent and planned.read):
        graced = cancelled and view.now >= view.cancelled_at + CANCEL_GRACE
        if past or graced:
            return End(
                endings.abandoned(call, read=planned.read, cancelled=cancelled, cause=view.cause)
            )
        if call_id in view.stalled:  # its worker is gone; it is safe to run again
            _resend(planned, view, steps)
            return None
        waited = view.now - view.sent.get(call_id, view.now)
        if sent and not started and waited >= view.resend_after:
            _resend(planned, view, steps)
        return None
    # Not taken by any worker: it did not start (a side effect only while still unclaimed).
    guard = not planned.read and sent
    if cancelled:
        result = endings.cancelled_before_start(call.id, call.name, view.cause)
        return End(result, EventKind.cancelled, guard)
    if failed is not None:
        return End(endings.skipped_after(call.id, call.name, failed), EventKind.skipped, guard)
    if past:
        if planned.effect == "ask" and not sent:
            return End(_refused(call, "approval timed out"), EventKind.decision)
        return End(endings.skipped_at_deadline(call.id, call.name), EventKind.skipped, guard)
    if sent:
        if view.now - view.sent[call_id] >= view.resend_after:
            _resend(planned, view, steps)
        return None
    if planned.effect == "allow":
        steps.send.append([call_id])
        return None
    if planned.effect == "ask":
        return _approval(view, call, steps)
    return None  # refused: its end was recorded with the batch


def _resend(planned: PlannedCall, view: View, steps: Steps) -> None:
    """A call sent long ago that no worker took: its message was lost. One that
    asked goes again only under an approval the advancer may trust (granted,
    its seal checked), which it is admitted and signed with again."""
    answer = view.approvals.get(planned.id)
    if planned.effect == "ask" and not (answer and answer.status == "approved" and answer.sealed):
        return
    steps.resend.append(planned.id)


def _approval(view: View, call: ToolCall, steps: Steps) -> End | None:
    answer = view.approvals.get(call.id)
    if answer is None:
        steps.ask.append(call.id)
        return None
    if not answer.sealed:
        text = "the approval's stored answer does not match its seal, so the call was not run"
        return End(_refused(call, text), EventKind.decision)
    if answer.status == "pending":
        return None
    if answer.status == "approved":
        steps.run_approved.append(call.id)
        return None
    if answer.status == "denied":
        reason = f"the user ({answer.by}) refused it: {answer.reason or 'no reason given'}"
        return End(_refused(call, reason), EventKind.decision)
    return End(_refused(call, "approval timed out"), EventKind.decision)


def _refused(call: ToolCall, reason: str) -> ToolResult:
    return endings.denied(call.id, call.name, reason)


def _chain(plan: BatchPlan, steps: Steps, index: int, ended: set[str]) -> None:
    """An allowed ordered step about to be sent takes the steps after it along."""
    stage = plan.stages[index]
    if stage.parallel or [stage.calls[0]] not in steps.send:
        return
    chain = plan.chain_from(index, ended)
    if len(chain) > 1:
        steps.send[steps.send.index([stage.calls[0]])] = chain


def _call(plan: BatchPlan, call_id: str) -> ToolCall:
    return plan.call(call_id)
