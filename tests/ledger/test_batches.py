"""What the sweep looks at (`runtime/ledger/batches.py`): a stale open batch,
unless its every open call waits for an answer to its approval; every open
batch after the state lost its data (docs/architecture.md, "The sweep")."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from runtime.ledger.approvals import Approvals
from runtime.ledger.tables import BatchRow, utc_now
from runtime.types import Batch, Status, ToolCall, ToolResult
from tests.ledger.test_retention import KEY, ledger, make  # noqa: F401  (the fixture)

BATCHES = BatchRow.__table__


def _ahead(store, batch_id: str) -> None:
    """A deadline an hour ahead: the sweep looks only at batches with one."""
    at = utc_now() + timedelta(hours=1)
    statement = update(BATCHES).where(BATCHES.c.id == batch_id).values(deadline_at=at)
    store.transaction(lambda c: c.execute(statement), core=True)


def test_a_batch_waiting_only_for_an_approval_is_passed_by_until_it_is_answered(ledger):  # noqa: F811
    waiting = make(ledger, ended=False)  # call a ended, call b waits for its approval
    _ahead(ledger, waiting)
    now = utc_now()
    stale = now - timedelta(seconds=15)

    assert waiting not in ledger.needing_attention(now=now, stale_before=stale).batches
    assert waiting in ledger.needing_attention(now=now, stale_before=now).batches  # everything

    Approvals(ledger, KEY).answer(waiting, "b", approve=True, by="ann")
    assert waiting in ledger.needing_attention(now=now, stale_before=stale).batches


def test_a_stale_batch_with_a_call_not_waiting_for_anyone_is_looked_at(ledger):  # noqa: F811
    sent = Batch(calls=[ToolCall(id="r", name="echo")])  # sent: its message may be lost
    ledger.record_batch(sent, columns={"deadline_at": utc_now() + timedelta(hours=1)})
    every_ended = make(ledger, ended=False)
    _ahead(ledger, every_ended)
    done = ToolResult(
        call_id="b", tool="write", status=Status.denied, model_message="no", summary="no"
    )
    ledger.record_result(every_ended, done)  # not marked ended: the sweep marks it
    later = utc_now() + timedelta(minutes=1)

    found = ledger.needing_attention(now=later, stale_before=later - timedelta(seconds=15))

    assert {sent.id, every_ended} <= set(found.batches)
