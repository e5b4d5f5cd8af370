"""A call's end as rows, kept while the ledger was away: once the ledger is
back it yields to the end published for its call, the one its caller got
(docs/architecture.md, "One end per call"); an end written now is its own."""

from __future__ import annotations

import pytest

from runtime.ledger.ends import CallEnd
from runtime.ledger.store import Ledger
from runtime.results.formatter import failure
from runtime.types import Status
from tests.support.waiting import wait_for

MINE = failure("a", "tool_a", Status.error, "the ledger is unavailable", kind="ledger")
THEIRS = failure("a", "tool_a", Status.outcome_unknown, "the process was lost", kind="lost")


@pytest.fixture
def ledger(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    published = {("kept", "a"): THEIRS, ("grouped", "a"): THEIRS, ("now", "a"): THEIRS}
    ledger.announced_by(lambda batch_id, call_id: published.get((batch_id, call_id)))
    yield ledger
    ledger.close()


def landed(ledger: Ledger, batch_id: str, bound: float = 30.0):
    """The call's end once the buffer has written it (it tries every second)."""
    return wait_for(lambda: ledger.ends(batch_id).get("a"), bound, "the kept end landing")


def test_an_end_kept_for_later_writes_the_end_published_for_its_call(ledger):
    ledger.later(lambda: ledger.record_result("kept", MINE))
    ledger.later(lambda: ledger.record_end(CallEnd("grouped", MINE, redactor=ledger.redactor)))
    for batch_id in ("kept", "grouped"):
        end = landed(ledger, batch_id)
        assert (end.status, end.model_message) == (THEIRS.status, THEIRS.model_message)
    [row] = [e for e in ledger.events("kept") if e.call_id == "a"]
    assert row.status == "outcome_unknown"


def test_an_end_kept_for_a_call_nothing_published_writes_its_own(ledger):
    ledger.later(lambda: ledger.record_result("alone", MINE))
    assert landed(ledger, "alone").status is Status.error


def test_an_end_written_now_is_its_own(ledger):
    assert ledger.record_result("now", MINE) is True
    assert ledger.ends("now")["a"].status is Status.error
