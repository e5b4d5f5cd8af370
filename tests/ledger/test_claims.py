"""The claim that makes a non-idempotent side effect at-most-once, on a real
SQLite ledger: the first delivery holds the call, any later one is told why it
must not run it."""

from __future__ import annotations

import pytest

from runtime.ledger.claims import Start
from runtime.ledger.store import EventKind, Ledger
from runtime.results import endings
from runtime.types import Batch, ToolCall


@pytest.fixture
def ledger(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger.record_batch(Batch(id="b1", calls=[ToolCall(id="w", name="bump", arguments={})]))
    yield ledger
    ledger.close()


def test_the_first_delivery_claims_the_call_and_records_its_start(ledger):
    begun = ledger.claim("b1", "w", worker="effects@h")
    assert (begun.start, begun.delivery) == (Start.run, 1)
    [call] = ledger.calls("b1")
    assert (call.status, call.worker, call.attempts) == ("running", "effects@h", 1)
    [started] = ledger.events("b1", "w")
    assert (started.kind, started.worker, started.attempt) == (EventKind.started, "effects@h", 1)


def test_a_redelivery_of_a_claimed_call_that_never_ended_does_not_run_it(ledger):
    ledger.claim("b1", "w", worker="effects@h")
    again = ledger.claim("b1", "w", worker="effects@other")
    assert (again.start, again.row.worker) == (Start.taken, "effects@h")
    assert len(ledger.events("b1", "w")) == 1  # no second start


def test_a_redelivery_of_a_finished_call_gets_its_recorded_end(ledger):
    ledger.claim("b1", "w", worker="effects@h")
    ledger.record_result("b1", endings.timed_out("w", "bump", 1.0), kind=EventKind.finished)
    again = ledger.claim("b1", "w", worker="effects@h")
    assert (again.start, again.row.status) == (Start.finished, "timeout")


def test_a_call_no_client_recorded_is_never_claimed(ledger):
    assert ledger.claim("b1", "nobody", worker="effects@h").start is Start.unrecorded
    assert ledger.claim("b2", "w", worker="effects@h").start is Start.unrecorded


def test_a_call_of_a_cancelled_batch_is_never_claimed(ledger):
    ledger.mark_cancelled("b1", by="ann")
    begun = ledger.claim("b1", "w", worker="effects@h")
    assert begun.start is Start.cancelled
    [call] = ledger.calls("b1")
    assert (call.status, call.worker, call.attempts) == ("pending", None, 0)
    assert ledger.events("b1", "w") == []  # no start: the tool did not run
