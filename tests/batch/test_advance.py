"""Carrying a batch on (runtime/batch/advance.py), through the `Advancer`'s
own methods: a batch recorded as its submitter records it, in a real SQLite
ledger, its calls run by the in-memory transport's workers. What is checked
is what the advancer leaves behind: the ledger's ends and rows, the results
announced, the messages workers took, the side effects a tool made.

Calls that must be running when the advancer acts are `held` reads, which
run until the test releases them; nothing here waits for time to pass."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import event, update

from runtime.batch import progress
from runtime.batch.advance import Advancer
from runtime.batch.plan import BatchPlan, build
from runtime.batch.progress import End
from runtime.batch.signer import Signer
from runtime.client.audit import BatchAudit
from runtime.gate.admission import Refused, admit
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import Ledger
from runtime.ledger.tables import ApprovalRow
from runtime.results import endings
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.transport.memory import MemoryTransport
from runtime.types import Batch, Mode, Status, ToolCall, ToolResult
from runtime.worker.in_memory import memory_transport
from tests.support.messages import KEY, policy
from tests.support.tools import held_running, marks, release
from tests.support.waiting import wait_for

HELD = "held"  # the label every held read of a test waits on
BOUND = 20.0  # seconds a wait may take before the test says what it was waiting for


@dataclass
class World:
    ledger: Ledger
    transport: MemoryTransport
    advancer: Advancer
    approvals: Approvals
    workspace: Path

    def record(
        self,
        *calls: tuple[str, str, dict],
        mode: Mode = Mode.auto,
        deadline: float = 60.0,
        approval_timeout: float = 30.0,
        allow: tuple[str, ...] = ("bump",),
    ) -> tuple[BatchPlan, dict[str, ToolResult]]:
        """Record a batch with its plan, as the submitter does before it sends
        anything (runtime/client/run.py); the plan and the refusals' ends."""
        batch = Batch(
            calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in calls],
            mode=mode,
            workspace=str(self.workspace),
        )
        rules = policy(self.workspace, allow=list(allow))
        admissions = [
            admit(
                call,
                registry=self.advancer.registry,
                mode=mode,
                workspace=self.workspace,
                policy=rules,
            )
            for call in batch.calls
        ]
        reply_to = self.transport.reply_to
        signer = Signer(KEY, batch, rules.snapshot(), reply_to=reply_to)
        plan = build(
            batch,
            admissions,
            sign=lambda a, where: signer.message(a, stage=where),
            policy=signer.snapshot,
            reply_to=reply_to,
            deadline=time.time() + deadline,
            approval_timeout=approval_timeout,
        )
        columns = {"deadline_at": datetime.fromtimestamp(plan.deadline, UTC)}
        audit = BatchAudit(self.ledger, batch, rules)
        assert audit.admissions(admissions, plan=plan.model_dump(mode="json"), columns=columns)
        return plan, {a.call.id: a.result for a in admissions if isinstance(a, Refused)}

    def ends(self, batch_id: str, count: int) -> dict[str, Status]:
        """The ledger's ends of the batch, once it holds `count` of them."""
        found = wait_for(
            lambda: ends if len(ends := self.ledger.ends(batch_id)) >= count else None,
            BOUND,
            f"{count} ends of batch {batch_id}",
        )
        return {call_id: result.status for call_id, result in found.items()}

    def held_running(self, count: int) -> None:
        held_running(self.workspace, count, BOUND)

    def until_ended(self, batch_id: str) -> None:
        """Until the ledger says the batch ended, with no one but its workers acting."""
        wait_for(lambda: self.ended(batch_id), BOUND, f"the end of batch {batch_id}")

    def ended(self, batch_id: str) -> bool:
        row = self.ledger.batch(batch_id)
        return row.ended_at is not None and self.ledger.plan(batch_id) is None

    def taken(self) -> list[str]:
        return [message.call_id for message in self.transport.taken]


@pytest.fixture
def world(tmp_path, workspace):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    transport = memory_transport(
        registry=registry,
        ledger=ledger,
        settings=Settings(home=tmp_path / "home"),
        key=KEY,
        sweep=False,
    )
    approvals = Approvals(ledger, KEY)
    advancer = Advancer(
        ledger=ledger,
        registry=registry,
        key=KEY,
        queue=transport,
        state=transport,
        approvals=approvals,
    )
    yield World(ledger, transport, advancer, approvals, workspace)
    release(workspace, HELD)
    transport.close()
    ledger.close()


def nap(call_id: str) -> tuple[str, str, dict]:
    return (call_id, "nap", {"label": call_id})


def held(call_id: str) -> tuple[str, str, dict]:
    return (call_id, "held", {"label": HELD})


def bump(call_id: str, label: str | None = None) -> tuple[str, str, dict]:
    return (call_id, "bump", {"label": label or call_id})


def test_begin_sends_the_first_stage_and_the_batch_runs_to_its_end(world):
    plan, refusals = world.record(nap("r1"), nap("r2"), bump("w1"), nap("r3"))
    world.advancer.begin(plan, refusals)
    assert world.ends(plan.batch.id, 4) == dict.fromkeys(["r1", "r2", "w1", "r3"], Status.ok)
    assert [m["label"] for m in marks(world.workspace, "effects")] == ["w1"]
    taken = world.taken()
    assert sorted(taken[:2]) == ["r1", "r2"] and taken[2:] == ["w1", "r3"]
    # The worker that ends the last stage's last call closes the batch: no sweep
    # (this world has none) and no other mover comes back for it.
    world.until_ended(plan.batch.id)  # and its unredacted plan is gone


def test_the_last_call_s_worker_closes_the_batch_and_drops_the_plan_s_copy(world):
    plan, refusals = world.record(nap("r1"), nap("r2"))
    world.advancer.begin(plan, refusals, copy=plan.model_dump(mode="json"))
    world.until_ended(plan.batch.id)
    assert world.transport.plan(plan.batch.id) is None
    assert world.advancer.close(plan.batch.id) is True  # closing again changes nothing


@pytest.mark.parametrize(("call", "transactions"), [(nap, 1), (bump, 2)])  # a write claims first
def test_a_one_call_batch_ends_in_its_call_s_end_transaction_and_its_copy_goes_with_it(
    world, call, transactions
):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    plan, refusals = world.record(call("r1"))
    begun: list[object] = []

    def count(connection) -> None:
        if threading.current_thread().name.startswith("memory-"):  # the worker's
            begun.append(connection)

    event.listen(Engine, "begin", count)
    try:
        world.advancer.begin(plan, refusals, copy=plan.model_dump(mode="json"))
        world.until_ended(plan.batch.id)
        # r1's end is published after its commit
        wait_for(lambda: "r1" in world.transport.ends(plan.batch.id), BOUND, "r1 published")
    finally:
        event.remove(Engine, "begin", count)
    assert len(begun) == transactions  # the call's end and the batch's: no close of its own
    assert world.transport.plan(plan.batch.id) is None  # dropped with the publish
    assert world.advancer.close(plan.batch.id) is True  # closing again changes nothing


def test_the_copy_of_an_ended_batch_s_plan_goes_too(world):
    plan, refusals = world.record(nap("r1"))
    world.transport.keep_plan(plan.batch.id, plan.model_dump(mode="json"))  # as the client does
    world.advancer.begin(plan, refusals)
    world.ends(plan.batch.id, 1)
    assert world.advancer.advance(plan.batch.id) is True
    assert world.ended(plan.batch.id) and world.transport.plan(plan.batch.id) is None


def test_the_submit_keeps_the_plans_copy_with_its_send_marks(world):
    plan, refusals = world.record(held("h1"), bump("w1"))
    world.advancer.begin(plan, refusals, copy=plan.model_dump(mode="json"))
    assert world.transport.plan(plan.batch.id) == plan.model_dump(mode="json")
    assert set(world.transport.sent(plan.batch.id)) == {"h1"}
    # One that sends nothing at submit (its call asks first) keeps its copy all the same.
    asking, refused = world.record(bump("a1"), mode=Mode.default, allow=())
    world.advancer.begin(asking, refused, copy=asking.model_dump(mode="json"))
    assert world.transport.plan(asking.batch.id) == asking.model_dump(mode="json")
    assert world.transport.sent(asking.batch.id) == {}
    world.held_running(1)
    release(world.workspace, HELD)


def test_an_advance_reads_the_ledger_in_one_transaction_a_pass(world):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    plan, refusals = world.record(held("h1"), held("h2"), bump("w1"))
    world.advancer.begin(plan, refusals)
    world.held_running(2)
    begun: list[object] = []

    def count(connection) -> None:
        begun.append(connection)

    event.listen(Engine, "begin", count)
    try:
        assert world.advancer.advance(plan.batch.id) is False  # nothing to do: one pass
    finally:
        event.remove(Engine, "begin", count)
    assert len(begun) == 1  # plan, cancel, ends and claims together
    release(world.workspace, HELD)
    assert world.ends(plan.batch.id, 3) == dict.fromkeys(["h1", "h2", "w1"], Status.ok)


def test_a_stage_with_a_running_call_holds_the_next_back(world):
    plan, refusals = world.record(held("h1"), held("h2"), bump("w1"))
    world.advancer.begin(plan, refusals)
    world.held_running(2)
    assert world.advancer.advance(plan.batch.id) is False
    assert sorted(world.taken()) == ["h1", "h2"] and world.ledger.ends(plan.batch.id) == {}
    release(world.workspace, HELD)
    assert world.ends(plan.batch.id, 3) == dict.fromkeys(["h1", "h2", "w1"], Status.ok)
    assert [m["label"] for m in marks(world.workspace, "effects")] == ["w1"]


def test_movers_at_once_send_each_call_once(world):
    plan, _ = world.record(held("h1"), held("h2"), held("h3"))
    movers = [
        threading.Thread(target=world.advancer.advance, args=(plan.batch.id,)) for _ in range(4)
    ]
    for mover in movers:
        mover.start()
    for mover in movers:
        mover.join()
    world.held_running(3)
    release(world.workspace, HELD)
    assert world.ends(plan.batch.id, 3) == dict.fromkeys(["h1", "h2", "h3"], Status.ok)
    assert sorted(world.taken()) == ["h1", "h2", "h3"]


def test_a_call_refused_at_submit_fails_the_batch_and_reads_still_run(world):
    plan, refusals = world.record(
        bump("w1"), ("x", "obliterate", {"label": "x"}), bump("w2"), nap("r1")
    )
    assert set(refusals) == {"x"}  # destructive, denied in auto mode
    world.advancer.begin(plan, refusals)
    ends = world.ends(plan.batch.id, 4)
    assert ends == {"w1": Status.ok, "x": Status.denied, "w2": Status.skipped, "r1": Status.ok}
    skipped = world.ledger.ends(plan.batch.id)["w2"]
    assert "call x (obliterate) failed before it" in skipped.model_message
    assert [m["label"] for m in marks(world.workspace, "effects")] == ["w1"]
    assert world.advancer.advance(plan.batch.id) is True and world.ended(plan.batch.id)


def test_expire_ends_the_open_calls_as_at_the_deadline(world):
    plan, refusals = world.record(held("h1"), bump("w1"))
    world.advancer.begin(plan, refusals)
    world.held_running(1)
    assert world.advancer.advance(plan.batch.id, expire=True) is True
    assert world.ends(plan.batch.id, 2) == {"h1": Status.timeout, "w1": Status.skipped}
    assert world.ended(plan.batch.id) and marks(world.workspace, "effects") == []
    # What the ledger ended is what was announced.
    assert world.transport.ends(plan.batch.id) == world.ledger.ends(plan.batch.id)


def test_a_cancel_ends_what_has_not_started_and_running_calls_end_after_the_grace(
    world, monkeypatch
):
    plan, refusals = world.record(held("h1"), bump("w1"))
    world.advancer.begin(plan, refusals)
    world.held_running(1)
    monkeypatch.setattr(progress, "CANCEL_GRACE", 3600.0)
    world.advancer.cancel(plan.batch.id, by="tester")
    # h1 has its grace, and nothing after its stage moves until it has ended.
    assert world.ledger.ends(plan.batch.id) == {}
    assert world.ledger.batch(plan.batch.id).cancelled_by == "tester"
    assert world.transport.cancelled(plan.batch.id)
    monkeypatch.setattr(progress, "CANCEL_GRACE", 0.0)
    assert world.advancer.advance(plan.batch.id) is True
    assert world.ends(plan.batch.id, 2) == {"h1": Status.cancelled, "w1": Status.cancelled}
    assert marks(world.workspace, "effects") == []


def test_a_call_ends_once_whoever_ends_it_second(world):
    plan, _ = world.record(bump("w1"))
    first = endings.skipped_at_deadline("w1", "bump")
    second = endings.cancelled_before_start("w1", "bump")
    assert world.advancer.conclude(plan, End(first)) is True
    assert world.advancer.conclude(plan, End(second)) is False
    assert world.ledger.ends(plan.batch.id) == {"w1": first}
    assert world.transport.ends(plan.batch.id) == {"w1": first}


def asked(world: World) -> BatchPlan:
    """A side effect in default mode: it waits for a person."""
    plan, refusals = world.record(bump("q1", "asked"), mode=Mode.default, allow=())
    world.advancer.begin(plan, refusals)
    assert [row.call_id for row in world.approvals.pending(plan.batch.id)] == ["q1"]
    [notice] = world.transport.watch(plan.batch.id).results({"q1"}, timeout=0)
    assert notice.status is Status.awaiting_approval
    assert world.taken() == []
    return plan


def test_an_approved_call_runs_with_the_arguments_the_approver_gave(world):
    plan = asked(world)
    assert world.advancer.advance(plan.batch.id) is False  # asked once, still waiting
    assert len(world.approvals.find("q1", plan.batch.id)) == 1
    world.approvals.answer(
        plan.batch.id, "q1", approve=True, by="ann", updated_arguments={"label": "changed"}
    )
    world.advancer.advance(plan.batch.id)
    assert world.ends(plan.batch.id, 1) == {"q1": Status.ok}
    assert [m["label"] for m in marks(world.workspace, "effects")] == ["changed"]


def test_an_approved_call_whose_message_was_lost_is_admitted_and_sent_again(world, monkeypatch):
    plan = asked(world)
    world.approvals.answer(
        plan.batch.id, "q1", approve=True, by="ann", updated_arguments={"label": "changed"}
    )
    world.transport.mark_sent(plan.batch.id, ["q1"])  # sent, and the message lost on the way
    assert world.advancer.advance(plan.batch.id) is False and world.taken() == []
    monkeypatch.setattr(world.advancer.viewer, "resend_after", 0.0)
    world.advancer.advance(plan.batch.id)
    assert world.ends(plan.batch.id, 1) == {"q1": Status.ok}
    assert world.taken() == ["q1"]
    assert [m["label"] for m in marks(world.workspace, "effects")] == ["changed"]


def test_a_denied_call_ends_denied_with_the_approver_s_reason(world):
    plan = asked(world)
    world.approvals.answer(plan.batch.id, "q1", approve=False, by="ann", reason="not today")
    assert world.advancer.advance(plan.batch.id) is True
    result = world.ledger.ends(plan.batch.id)["q1"]
    assert result.status is Status.denied and "(ann) refused it: not today" in result.model_message
    assert marks(world.workspace, "effects") == []


def test_an_approval_changed_without_the_key_ends_its_call_denied(world):
    plan = asked(world)
    world.approvals.answer(plan.batch.id, "q1", approve=True, by="ann")
    tamper = (
        update(ApprovalRow)
        .where(ApprovalRow.batch_id == plan.batch.id)
        .values(updated_arguments=True, arguments_given={"label": "evil"})
    )
    world.ledger.transaction(lambda session: session.exec(tamper))
    assert world.advancer.advance(plan.batch.id) is True
    result = world.ledger.ends(plan.batch.id)["q1"]
    assert result.status is Status.denied and "does not match its seal" in result.model_message
    assert marks(world.workspace, "effects") == []


def test_the_sweep_sends_a_recorded_batch_that_nobody_sent(world):
    plan, _ = world.record(nap("r1"), bump("w1"))  # its submitter died before sending
    assert world.advancer.sweep(everything=True) >= 1
    assert world.ends(plan.batch.id, 2) == {"r1": Status.ok, "w1": Status.ok}


def test_the_sweep_ends_a_batch_past_its_deadline(world):
    plan, _ = world.record(nap("r1"), bump("w1"), deadline=-1.0)
    assert world.advancer.sweep() == 1
    assert world.ends(plan.batch.id, 2) == {"r1": Status.skipped, "w1": Status.skipped}
    assert world.ended(plan.batch.id) and world.taken() == []


def test_a_sweep_that_finds_nothing_reads_the_ledger_once(world):
    """Deadlines, cancels, stale batches and expired approvals in one
    statement: the sweep runs every second on an idle cluster too."""
    plan, _ = world.record(nap("r1"))  # open, not due: the sweep leaves it be
    statements: list[str] = []

    def heard(conn, cursor, statement, *_: object) -> None:
        if not statement.startswith("BEGIN"):  # SQLite's own, where the transaction begins
            statements.append(statement)

    engine = world.ledger._engine
    event.listen(engine, "before_cursor_execute", heard)
    try:
        assert world.advancer.sweep() == 0
    finally:
        event.remove(engine, "before_cursor_execute", heard)
    assert len(statements) == 1, statements
    assert world.ledger.batch(plan.batch.id).ended_at is None


def test_the_sweep_expires_an_approval_and_its_call_ends_denied(world):
    plan, refusals = world.record(bump("q1"), mode=Mode.default, approval_timeout=0.0, allow=())
    world.advancer.begin(plan, refusals)
    assert world.advancer.sweep() == 1
    result = world.ledger.ends(plan.batch.id)["q1"]
    assert result.status is Status.denied and "approval timed out" in result.model_message
    assert world.approvals.get(plan.batch.id, "q1").status == "expired"
