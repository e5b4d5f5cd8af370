"""The batch's rules as a table (runtime/batch/progress.py): a plan and what is
known now in, the steps to take out. No transport, no ledger, no clock: `now`
is a number in the view (docs/architecture.md, "A batch the cluster owns").

A plan is written as its calls in the model's order: `r…` a read, `w…` a side
effect allowed as it stands, `q…` one that asks first, `x…` one refused at
submit. Consecutive reads share a parallel stage; every other call is an ordered
step of its own, as the planner makes them."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from runtime.batch.plan import CHAIN_STEPS, BatchPlan, PlannedCall, PlannedStage
from runtime.batch.progress import CANCEL_GRACE, RESEND_AFTER, Answer, View, next_steps
from runtime.ledger.tables import EventKind
from runtime.results import endings
from runtime.types import Batch, CallMessage, Mode, Status, ToolCall, ToolResult

NOW = 1_000_000.0
EFFECTS = {"r": "allow", "w": "allow", "q": "ask", "x": "refused"}


def sent_as(call_id: str) -> CallMessage:
    return CallMessage(
        batch_id="b",
        call_id=call_id,
        tool=f"tool_{call_id}",
        arguments={},
        mode=Mode.auto,
        workspace=".",
        position=0,
        policy={},
        decision={},
    )


def plan_of(calls: str, *, on_error: str = "stop", deadline: float = NOW + 600) -> BatchPlan:
    ids = calls.split()
    stages: list[PlannedStage] = []
    for call_id in ids:
        read = call_id.startswith("r")
        if read and stages and stages[-1].parallel:
            stages[-1].calls.append(call_id)
        else:
            stages.append(PlannedStage(parallel=read, calls=[call_id]))
    planned = {
        call_id: PlannedCall(
            id=call_id,
            tool=f"tool_{call_id}",
            read=call_id.startswith("r"),
            effect=EFFECTS[call_id[0]],
            reason="asks first",
            message=None if call_id.startswith("x") else sent_as(call_id),
            stage=index,
        )
        for index, stage in enumerate(stages)
        for call_id in stage.calls
    }
    batch = Batch(calls=[ToolCall(id=c, name=f"tool_{c}") for c in ids], on_error=on_error)
    return BatchPlan(
        batch=batch,
        policy={},
        reply_to=None,
        deadline=deadline,
        approval_timeout=60,
        calls=planned,
        stages=stages,
    )


def ended(call_id: str, status: Status) -> ToolResult:
    return ToolResult(
        call_id=call_id,
        tool=f"tool_{call_id}",
        status=status,
        model_message=status.value,
        summary=status.value,
    )


def view(
    *,
    ok: str = "",
    failed: str = "",
    sent: dict[str, float] | None = None,
    started: str = "",
    approvals: dict[str, Answer] | None = None,
    cancelled: float | None = None,
    lost: str = "",
    stalled: str = "",
    now: float = NOW,
) -> View:
    """`sent` and `cancelled` in seconds before `now`."""
    ends = {c: ended(c, Status.ok) for c in ok.split()}
    ends |= {c: ended(c, Status.error) for c in failed.split()}
    return View(
        ends=ends,
        sent={c: now - ago for c, ago in (sent or {}).items()},
        started=set(started.split()),
        approvals=approvals or {},
        cancelled_at=None if cancelled is None else now - cancelled,
        now=now,
        lost=frozenset(lost.split()),
        stalled=frozenset(stalled.split()),
    )


@dataclass
class Expect:
    ends: dict[str, Status] = field(default_factory=dict)
    send: list[list[str]] = field(default_factory=list)
    resend: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    run: list[str] = field(default_factory=list)
    finished: bool = False
    guarded: set[str] = field(default_factory=set)  # ends written only if still unclaimed


S = Status
PAST = {"deadline": NOW - 1}
CASES = {
    # Stage moves: the first stage with an open call is where the batch stands.
    "a fresh batch sends its first stage's reads, one message each": (
        "r1 r2 w1",
        {},
        view(),
        Expect(send=[["r1"], ["r2"]]),
    ),
    "a stage with an open read holds the next one back": (
        "r1 r2 w1",
        {},
        view(ok="r1", sent={"r2": 1}),
        Expect(),
    ),
    "the stage's last end lets the next stage go": (
        "r1 r2 w1",
        {},
        view(ok="r1 r2"),
        Expect(send=[["w1"]]),
    ),
    "an ordered step waits for the one before it": (
        "w1 r1",
        {},
        view(sent={"w1": 1}, started="w1"),
        Expect(),
    ),
    "a batch whose every call has ended is finished": (
        "r1 w1",
        {},
        view(ok="r1 w1"),
        Expect(finished=True),
    ),
    "a call refused at submit is passed like any ended call": (
        "r1 x1",
        {},
        view(ok="r1 x1"),
        Expect(finished=True),
    ),
    # on_error: a failed ordered step skips later side effects; reads still run.
    "stop: a failed step skips the next side effect and sends the read after it": (
        "w1 w2 r1 w3",
        {},
        view(failed="w1"),
        Expect(ends={"w2": S.skipped}, send=[["r1"]]),
    ),
    "stop: side effects after the read are skipped too, and the batch ends": (
        "w1 w2 r1 w3",
        {},
        view(failed="w1", ok="w2 r1"),
        Expect(ends={"w3": S.skipped}, finished=True),
    ),
    "stop: a step refused at submit fails the batch as one that ran": (
        "x1 w1",
        {},
        view(failed="x1"),
        Expect(ends={"w1": S.skipped}, finished=True),
    ),
    "stop: an ask after a failed step is skipped, not asked": (
        "w1 q1",
        {},
        view(failed="w1"),
        Expect(ends={"q1": S.skipped}, finished=True),
    ),
    "stop: a failed read fails nothing": ("r1 w1", {}, view(failed="r1"), Expect(send=[["w1"]])),
    "continue: a failed step does not stop the next": (
        "w1 w2",
        {"on_error": "continue"},
        view(failed="w1"),
        Expect(send=[["w2"]]),
    ),
    # Cancel: what has not started ends now; what runs gets a grace, then is abandoned.
    "a cancel ends every call not started, in every stage": (
        "r1 w1 q1",
        {},
        view(cancelled=0),
        Expect(ends={"r1": S.cancelled, "w1": S.cancelled, "q1": S.cancelled}, finished=True),
    ),
    "a cancel leaves a running call its grace": (
        "r1 w1",
        {},
        view(sent={"r1": 2}, started="r1", cancelled=CANCEL_GRACE - 0.5),
        Expect(),
    ),
    "a read sent but not taken counts as running under a cancel": (
        "r1 w1",
        {},
        view(sent={"r1": 2}, cancelled=1),
        Expect(),
    ),
    "after the grace a running read ends cancelled, the rest too": (
        "r1 w1",
        {},
        view(sent={"r1": 9}, started="r1", cancelled=CANCEL_GRACE),
        Expect(ends={"r1": S.cancelled, "w1": S.cancelled}, finished=True),
    ),
    "after the grace a running side effect's outcome is unknown": (
        "w1 w2",
        {},
        view(sent={"w1": 9}, started="w1", cancelled=CANCEL_GRACE),
        Expect(ends={"w1": S.outcome_unknown, "w2": S.cancelled}, finished=True),
    ),
    "a side effect sent but not taken ends cancelled only while unclaimed": (
        "w1",
        {},
        view(sent={"w1": 1}, cancelled=0),
        Expect(ends={"w1": S.cancelled}, finished=True, guarded={"w1"}),
    ),
    # The deadline.
    "past the deadline a read sent ends timed out": (
        "r1 r2",
        PAST,
        view(ok="r2", sent={"r1": 5, "r2": 5}),
        Expect(ends={"r1": S.timeout}, finished=True),
    ),
    "past the deadline a running side effect's outcome is unknown": (
        "w1",
        PAST,
        view(sent={"w1": 5}, started="w1"),
        Expect(ends={"w1": S.outcome_unknown}, finished=True),
    ),
    "past the deadline a side effect sent but not taken is skipped while unclaimed": (
        "w1",
        PAST,
        view(sent={"w1": 5}),
        Expect(ends={"w1": S.skipped}, finished=True, guarded={"w1"}),
    ),
    "past the deadline what was never sent is skipped": (
        "r1 w1 w2",
        PAST,
        view(ok="r1", sent={"r1": 5}),
        Expect(ends={"w1": S.skipped, "w2": S.skipped}, finished=True),
    ),
    "past the deadline an ask never approved is denied": (
        "q1",
        PAST,
        view(approvals={"q1": Answer("pending")}),
        Expect(ends={"q1": S.denied}, finished=True),
    ),
    "past the deadline an approved call sent but not taken is skipped while unclaimed": (
        "q1",
        PAST,
        view(sent={"q1": 5}, approvals={"q1": Answer("approved", by="ann")}),
        Expect(ends={"q1": S.skipped}, finished=True, guarded={"q1"}),
    ),
    "before the deadline nothing is abandoned": (
        "r1",
        {"deadline": NOW + 1},
        view(sent={"r1": 5}, started="r1"),
        Expect(),
    ),
    # Approvals.
    "an ask nobody has been asked about is asked": ("q1 w1", {}, view(), Expect(ask=["q1"])),
    "a pending approval holds the batch": (
        "q1 w1",
        {},
        view(approvals={"q1": Answer("pending")}),
        Expect(),
    ),
    "an approved call runs": (
        "q1 w1",
        {},
        view(approvals={"q1": Answer("approved", by="ann")}),
        Expect(run=["q1"]),
    ),
    "a denied call ends denied and fails the batch": (
        "q1 w1",
        {},
        view(approvals={"q1": Answer("denied", by="ann", reason="no")}),
        Expect(ends={"q1": S.denied, "w1": S.skipped}, finished=True),
    ),
    "an expired approval ends denied": (
        "q1",
        {},
        view(approvals={"q1": Answer("expired")}),
        Expect(ends={"q1": S.denied}, finished=True),
    ),
    "an approval whose seal does not match ends denied, whatever it says": (
        "q1",
        {},
        view(approvals={"q1": Answer("approved", by="mallory", sealed=False)}),
        Expect(ends={"q1": S.denied}, finished=True),
    ),
    # Resends: a message sent long ago that no worker took was lost.
    "a read sent long ago and not taken is sent again": (
        "r1",
        {},
        view(sent={"r1": RESEND_AFTER}),
        Expect(resend=["r1"]),
    ),
    "a read sent a moment ago is not": ("r1", {}, view(sent={"r1": RESEND_AFTER - 1}), Expect()),
    "a side effect sent long ago and not taken is sent again": (
        "w1",
        {},
        view(sent={"w1": RESEND_AFTER}),
        Expect(resend=["w1"]),
    ),
    # Leases: a claimed call whose holder stopped renewing its lease was lost.
    "a claimed side effect whose worker is gone ends outcome_unknown, and the next step goes": (
        "w1 w2",
        {"on_error": "continue"},
        view(sent={"w1": 1}, started="w1", lost="w1"),
        Expect(ends={"w1": S.outcome_unknown}, send=[["w2"]]),
    ),
    "a claimed side effect whose worker lives waits, however long it runs": (
        "w1 w2",
        {},
        view(sent={"w1": RESEND_AFTER * 100}, started="w1"),
        Expect(),
    ),
    "a lost call past the deadline says its worker was lost": (
        "w1",
        PAST,
        view(sent={"w1": 1}, started="w1", lost="w1"),
        Expect(ends={"w1": S.outcome_unknown}, finished=True),
    ),
    "a read whose worker is gone is sent again at once": (
        "r1",
        {},
        view(sent={"r1": 1}, started="r1", stalled="r1"),
        Expect(resend=["r1"]),
    ),
    "a read whose worker is gone ends timeout past the deadline": (
        "r1",
        PAST,
        view(sent={"r1": 1}, started="r1", stalled="r1"),
        Expect(ends={"r1": S.timeout}, finished=True),
    ),
    "a call a worker took is never sent again": (
        "w1",
        {},
        view(sent={"w1": RESEND_AFTER * 10}, started="w1"),
        Expect(),
    ),
    "an approved call sent long ago and not taken is sent again": (
        "q1",
        {},
        view(sent={"q1": RESEND_AFTER}, approvals={"q1": Answer("approved", by="ann")}),
        Expect(resend=["q1"]),
    ),
    "an approved call whose seal no longer matches is not sent again": (
        "q1",
        {},
        view(
            sent={"q1": RESEND_AFTER},
            approvals={"q1": Answer("approved", by="mallory", sealed=False)},
        ),
        Expect(),
    ),
    "an approved call is not sent again while its approval cannot be read": (
        "q1",
        {},
        view(sent={"q1": RESEND_AFTER}),
        Expect(),
    ),
    # Chains: consecutive allowed ordered steps travel as one message.
    "consecutive allowed steps go as one chain": (
        "w1 w2 w3",
        {},
        view(),
        Expect(send=[["w1", "w2", "w3"]]),
    ),
    "a chain stops before a read": ("w1 w2 r1 w3", {}, view(), Expect(send=[["w1", "w2"]])),
    "a chain stops before an ask": ("w1 q1 w2", {}, view(), Expect(send=[["w1"]])),
    "a chain stops before a refused call": ("w1 x1 w2", {}, view(), Expect(send=[["w1"]])),
    "a chain starts where the batch stands": (
        "w1 w2 w3",
        {},
        view(ok="w1"),
        Expect(send=[["w2", "w3"]]),
    ),
    "a chain carries at most its number of steps": (
        " ".join(f"w{i}" for i in range(CHAIN_STEPS + 5)),
        {},
        view(),
        Expect(send=[[f"w{i}" for i in range(CHAIN_STEPS)]]),
    ),
}


@pytest.mark.parametrize(("calls", "options", "known", "expect"), CASES.values(), ids=CASES)
def test_next_steps(calls, options, known, expect):
    steps = next_steps(plan_of(calls, **options), known)
    assert {e.result.call_id: e.result.status for e in steps.ends} == expect.ends
    assert {e.result.call_id for e in steps.ends if e.only_if_pending} == expect.guarded
    assert (steps.send, steps.resend, steps.ask, steps.run_approved, steps.finished) == (
        expect.send,
        expect.resend,
        expect.ask,
        expect.run,
        expect.finished,
    )


def test_each_end_is_recorded_as_its_kind_of_event():
    steps = next_steps(plan_of("w1 w2 q1"), view(cancelled=0))
    assert [e.kind for e in steps.ends] == [EventKind.cancelled] * 3
    steps = next_steps(plan_of("w1 w2 q1"), view(failed="w1"))
    assert [e.kind for e in steps.ends] == [EventKind.skipped, EventKind.skipped]
    steps = next_steps(plan_of("q1"), view(approvals={"q1": Answer("denied", by="ann")}))
    assert [e.kind for e in steps.ends] == [EventKind.decision]


def test_the_results_say_why_the_call_ended():
    def said(calls, known, **options):
        return {
            e.result.call_id: e.result.model_message
            for e in next_steps(plan_of(calls, **options), known).ends
        }

    assert "call w1 (tool_w1) failed before it" in said("w1 w2", view(failed="w1"))["w2"]
    assert (
        "refused it: too risky"
        in said("q1", view(approvals={"q1": Answer("denied", by="ann", reason="too risky")}))["q1"]
    )
    assert (
        "does not match its seal"
        in said("q1", view(approvals={"q1": Answer("approved", sealed=False)}))["q1"]
    )
    assert "approval timed out" in said("q1", view(), deadline=NOW)["q1"]
    assert "deadline passed" in said("w1", view(), deadline=NOW)["w1"]
    closed = View(
        ends={},
        sent={},
        started=set(),
        approvals={},
        cancelled_at=NOW,
        now=NOW,
        cause="the runtime was closed",
    )
    assert "the runtime was closed" in said("w1", closed)["w1"]
    assert said("r1", view(sent={"r1": 1}, cancelled=CANCEL_GRACE))["r1"] == (
        endings.cancelled_while_running("r1", "tool_r1", read=True).model_message
    )


def test_a_stage_moves_on_in_the_same_pass_that_ends_its_last_call():
    """Ends decided in one pass count at once: once the grace has ended the
    stage's running read, the next stage is cancelled in the same pass. Before,
    nothing past the stage moves, not even under a cancel."""
    steps = next_steps(plan_of("r1 r2 w1"), view(ok="r1", sent={"r2": 1}, cancelled=0))
    assert steps.ends == [] and not steps.finished
    steps = next_steps(plan_of("r1 r2 w1"), view(ok="r1", sent={"r2": 9}, cancelled=CANCEL_GRACE))
    assert [e.result.call_id for e in steps.ends] == ["r2", "w1"] and steps.finished
