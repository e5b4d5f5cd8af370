"""Approvals in a real SQLite ledger: request (once), answer (the first answer
wins, an expired one cannot be answered), the seal over what was answered,
expiry, and what is pending. Nothing waits: the batch is carried on by
whoever answers (tests/client/test_run.py)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from runtime.ledger.approvals import Approvals, sealed
from runtime.ledger.store import EventKind, Ledger
from tests.support.waiting import wait_for

SECRET = "sk-ant-api03-" + "S3cr3t" * 6
KEY = b"k" * 32
FAR = 3600.0  # an approval timeout no test reaches


@pytest.fixture
def approvals(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    yield Approvals(ledger, KEY)
    ledger.close()


def ask(approvals, call_id="c1", batch_id="b1", timeout=FAR, **arguments) -> bool:
    return approvals.request(
        batch_id,
        call_id,
        tool="bump",
        arguments=arguments or {"label": "x"},
        reason="write tools need approval",
        timeout=timeout,
    )


def test_a_request_is_stored_once_with_redacted_arguments_and_an_event(approvals):
    assert ask(approvals, token=SECRET) is True
    assert ask(approvals, token=SECRET) is False  # a second mover asks nothing more
    row = approvals.get("b1", "c1")
    assert (row.status, row.tool, row.reason) == ("pending", "bump", "write tools need approval")
    assert SECRET not in json.dumps(row.arguments)
    kinds = [e.kind for e in approvals.ledger.events("b1", "c1")]
    assert kinds == [EventKind.approval_asked.value]


def test_the_first_answer_wins_and_is_sealed(approvals):
    ask(approvals)
    assert approvals.answer("b1", "c1", approve=True, by="alice")
    assert not approvals.answer("b1", "c1", approve=False, by="bob", reason="late")
    row = approvals.get("b1", "c1")
    assert (row.status, row.answered_by) == ("approved", "alice") and sealed(KEY, row)
    assert not sealed(b"another key" * 3, row)


def test_the_seal_is_under_the_approvals_own_key_not_the_signing_key(approvals):
    import hashlib
    import hmac

    ask(approvals)
    approvals.answer("b1", "c1", approve=True, by="alice")
    row = approvals.get("b1", "c1")
    body = json.dumps(["b1", "c1", "approved", "alice", None], separators=(",", ":"))
    assert row.seal != hmac.new(KEY, body.encode(), hashlib.sha256).hexdigest()
    assert sealed(KEY, row)


def test_an_unknown_call_cannot_be_answered(approvals):
    assert not approvals.answer("b1", "nope", approve=True, by="alice")


def test_updated_arguments_live_only_in_the_sealed_row(approvals):
    ask(approvals)
    assert approvals.answer(
        "b1", "c1", approve=True, by="alice", updated_arguments={"label": "edited", "token": SECRET}
    )
    row = approvals.get("b1", "c1")
    assert row.updated_arguments and row.arguments_given == {"label": "edited", "token": SECRET}
    assert sealed(KEY, row)
    given = [e for e in approvals.ledger.events("b1", "c1") if e.kind == "approval_given"]
    assert SECRET not in json.dumps(given[0].detail)  # the event keeps them redacted
    forged = json.dumps({"label": "evil"})
    approvals.ledger.transaction(
        lambda c: c.execute(
            text("UPDATE toolrun_approval SET arguments_given = :a"), {"a": forged}
        ),
        core=True,
    )
    assert not sealed(KEY, approvals.get("b1", "c1"))


def test_an_expired_approval_cannot_be_answered_and_leaves_the_pending_list(approvals):
    ask(approvals, timeout=0.05)
    wait_for(lambda: approvals.pending() == [], what="the approval's expiry")
    assert approvals.expired() == [("b1", "c1")]
    assert not approvals.answer("b1", "c1", approve=True, by="late")
    assert approvals.expire("b1", "c1")
    assert approvals.get("b1", "c1").status == "expired"


def test_pending_lists_only_unanswered_calls_oldest_first(approvals):
    ask(approvals, "c1")
    ask(approvals, "c2")
    ask(approvals, "c3", batch_id="b2")
    approvals.answer("b1", "c2", approve=False, by="bob", reason="no")
    assert [(r.batch_id, r.call_id) for r in approvals.pending()] == [("b1", "c1"), ("b2", "c3")]
    assert [r.call_id for r in approvals.pending("b2")] == ["c3"]


def test_an_approval_of_a_call_that_ended_leaves_the_list_and_cannot_be_answered(approvals):
    """A call cancelled (or ended any other way) while it waited: its request
    is no longer something to answer."""
    from runtime.results import endings

    ask(approvals, "c1")
    ask(approvals, "c2")
    approvals.ledger.record_result("b1", endings.cancelled_before_start("c1", "bump"))
    assert [r.call_id for r in approvals.pending()] == ["c2"]
    assert not approvals.answer("b1", "c1", approve=True, by="late")
    assert not approvals.answer("b1", "c1", approve=False, by="late", reason="no")
    assert approvals.get("b1", "c1").status == "pending"
    assert EventKind.approval_given.value not in [e.kind for e in approvals.ledger.events("b1")]
    assert approvals.answer("b1", "c2", approve=True, by="alice")
