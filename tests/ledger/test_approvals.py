"""Approvals in a real SQLite ledger, with the memory transport as the doorbell:
request, answer (the first answer wins), wait, expire, and what is pending."""

from __future__ import annotations

import threading
import time

import pytest

from runtime.ledger import approvals as approvals_module
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import EventKind, Ledger
from runtime.registry.loading import load_tools
from runtime.settings import Settings
from runtime.transport.memory import MemoryTransport

SECRET = "sk-ant-api03-" + "S3cr3t" * 6
FAR = 3600.0  # an approval timeout no test reaches


@pytest.fixture
def approvals(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    transport = MemoryTransport(registry=load_tools(mcp_servers_file=None), ledger=ledger,
                                settings=Settings(home=tmp_path))  # fmt: skip
    yield Approvals(ledger, transport)
    transport.close()
    ledger.close()


def ask(approvals, call_id="c1", batch_id="b1", timeout=FAR, **arguments):
    return approvals.request(batch_id, call_id, tool="bump", arguments=arguments or {"label": "x"},
                             reason="write tools need approval", timeout=timeout)  # fmt: skip


def test_a_request_is_pending_with_redacted_arguments_and_an_event(approvals):
    row = ask(approvals, token=SECRET)
    assert (row.status, row.tool, row.reason) == ("pending", "bump", "write tools need approval")
    stored = approvals.get("b1", "c1")
    assert stored.status == "pending" and SECRET not in str(stored.arguments)
    assert [e.kind for e in approvals.ledger.events("b1", "c1")] == [EventKind.approval_asked]


def test_the_first_answer_wins(approvals):
    ask(approvals)
    assert approvals.answer("b1", "c1", approve=True, by="alice")
    assert not approvals.answer("b1", "c1", approve=False, by="bob", reason="too late")
    row = approvals.get("b1", "c1")
    assert (row.status, row.answered_by, row.answer) == ("approved", "alice", None)
    given = [e for e in approvals.ledger.events("b1", "c1") if e.kind == EventKind.approval_given]
    assert [e.approver for e in given] == ["alice"]


def test_an_unknown_call_cannot_be_answered(approvals):
    assert not approvals.answer("b1", "nobody", approve=True, by="alice")


def test_a_refusal_carries_its_reason(approvals):
    ask(approvals)
    assert approvals.answer("b1", "c1", approve=False, by="bob", reason="not this one")
    answer = approvals.wait("b1", "c1", deadline=time.monotonic() + FAR)
    assert (answer.status, answer.by, answer.reason) == ("denied", "bob", "not this one")


def test_updated_arguments_reach_the_waiter_through_the_doorbell_not_the_ledger(approvals):
    ask(approvals)
    updated = {"label": "edited", "token": SECRET}
    assert approvals.answer("b1", "c1", approve=True, by="alice", updated_arguments=updated)
    answer = approvals.wait("b1", "c1", deadline=time.monotonic() + FAR)
    assert (answer.status, answer.arguments, answer.updated) == ("approved", updated, True)
    rows = approvals.ledger.events("b1", "c1")
    assert SECRET not in str([r.detail for r in rows])
    assert approvals.get("b1", "c1").updated_arguments  # the row says only that they changed


def test_the_doorbell_wakes_a_waiting_batch(approvals, monkeypatch):
    monkeypatch.setattr(approvals_module, "POLL_SECONDS", FAR)  # only the bell can wake it now
    ask(approvals)
    waiting, answers = threading.Event(), []

    def stop() -> bool:  # called right before each wait: the waiter is listening by now
        waiting.set()
        return False

    waiter = threading.Thread(target=lambda: answers.append(approvals.wait(
        "b1", "c1", deadline=time.monotonic() + FAR, stop=stop)), daemon=True)  # fmt: skip
    waiter.start()
    waiting.wait()
    approvals.answer("b1", "c1", approve=True, by="alice")
    waiter.join(10)  # a guard only: without the bell it would sleep for an hour
    assert [a.status for a in answers] == ["approved"]


def test_an_unanswered_approval_expires_and_cannot_be_answered_then(approvals):
    ask(approvals)
    answer = approvals.wait("b1", "c1", deadline=time.monotonic() - 1)
    assert (answer.status, answer.by, answer.reason) == ("expired", None, "approval timed out")
    assert not approvals.answer("b1", "c1", approve=True, by="late")


def test_a_batch_that_ends_stops_its_wait_and_the_approval_expires(approvals):
    ask(approvals)
    answer = approvals.wait("b1", "c1", deadline=time.monotonic() + FAR, stop=lambda: True)
    assert answer.status == "expired"


def test_pending_lists_only_unanswered_calls_oldest_first(approvals):
    for call_id in ("a", "b", "c"):
        ask(approvals, call_id)
    ask(approvals, "z", batch_id="b2")
    approvals.answer("b1", "b", approve=True, by="alice")
    assert [(r.batch_id, r.call_id) for r in approvals.pending()] == [
        ("b1", "a"), ("b1", "c"), ("b2", "z")]  # fmt: skip
    assert [r.call_id for r in approvals.pending("b2")] == ["z"]
