"""Kept batch records (runtime/transport/copies.py): a record its submitter
wrote is dropped on a later round trip, never lost. Real redis-server."""

from __future__ import annotations

import json

import pytest
import redis

from runtime.keyspace.names import plan_key
from runtime.transport import copies
from runtime.transport.memory_copies import MemoryCopies
from tests.support.round_trips import Counting, counted_state
from tests.support.waiting import wait_for

pytestmark = pytest.mark.server


@pytest.fixture
def state(tmp_path):
    with counted_state(tmp_path) as found:
        yield found


def test_a_keep_tried_again_finds_its_own_record_and_not_a_racers(state):
    """Kept again after its answer was lost (a Redis restart), a record is
    still its submitter's; another record of the batch is a racer's."""
    assert state.keep_record("b1", '{"a": 1}')
    assert state.keep_record("b1", '{"a": 1}', patience=1.0)
    assert not state.keep_record("b1", '{"a": 2}')
    assert state.kept_record("b1") == '{"a": 1}'


def test_a_written_records_drop_rides_the_next_submits_marks(state):
    state.keep_record("b1", "{}")
    before = Counting.sends
    state.drop_record("b1", later=True)
    assert Counting.sends == before  # no round trip of its own
    assert "b1" in state.kept_records()
    before = Counting.sends
    marked = state.mark_sent("b2", ["c1"], plan={"batch": {"id": "b2"}}, record="{}")
    assert (marked, Counting.sends - before) == (["c1"], 1)
    assert set(state.kept_records()) == {"b2"}


def test_an_ended_batchs_plan_copy_goes_with_its_record(state):
    """Its reads ended before its record was written: the copy goes too."""
    state.mark_sent("b1", ["c1"], plan={"batch": {"id": "b1"}}, record="{}")
    state.drop_record("b1", later=True, plan=True)
    assert state.plan("b1") is not None
    state.drop_due(every=True)
    assert (state.plan("b1"), state.kept_records()) == (None, {})


def test_a_drop_with_no_round_trip_to_ride_goes_on_its_own_once_due(state, monkeypatch):
    state.keep_record("b1", "{}")
    state.drop_record("b1", later=True)
    state.drop_due()
    assert "b1" in state.kept_records()  # not due yet
    monkeypatch.setattr(copies, "DROP_SECONDS", 0.0)
    state.drop_due()
    assert state.kept_records() == {}


def test_the_listeners_thread_drops_what_waits_and_so_does_close(state, monkeypatch):
    monkeypatch.setattr(copies, "DROP_SECONDS", 0.0)
    state.watch("b0")  # the listener runs
    state.keep_record("b1", "{}")
    state.drop_record("b1", later=True)
    wait_for(lambda: state.kept_records() == {}, 10, "drop of b1's kept record")
    monkeypatch.setattr(copies, "DROP_SECONDS", 3600.0)
    state.keep_record("b2", "{}")
    state.drop_record("b2", later=True)
    state.drop_due()
    assert "b2" in state.kept_records()
    client = redis.Redis(connection_pool=state.client.connection_pool)
    state.drop_due(every=True)  # as `close` does
    assert client.hkeys("toolrun:unrecorded") == []


def test_a_plans_copy_given_as_its_json_text_is_kept_as_it_is(state, tmp_path):
    """A submit makes its plan's JSON once (runtime/client/first_send.py);
    Redis and the memory transport keep the same plan from it as from its dict."""
    text = '{"batch": {"id": "b1"}, "stages": []}'
    state.mark_sent("b1", ["c1"], plan=text)
    state.keep_plan("b2", text)
    memory = MemoryCopies()
    memory.keep_plan("b1", text)
    assert state.plan("b1") == state.plan("b2") == memory.plan("b1") == json.loads(text)
    assert state.client.get(plan_key("b1")) == text.encode()
