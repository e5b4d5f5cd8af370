"""Rate windows, concurrency slots, fair share and held batches on the
session stack's real Redis (docs/architecture.md, "Flow control")."""

from __future__ import annotations

import json
import time
import uuid

import limits as ratelimits
import pytest
import redis

from runtime.flow.throttle import Throttle
from runtime.keyspace.names import sent_key


@pytest.fixture
def throttle(stack):
    client = redis.Redis.from_url(stack.redis_url)
    yield Throttle(client)
    client.close()


def unique() -> str:
    return uuid.uuid4().hex[:10]


def test_a_moving_window_allows_its_rate_then_says_when_it_frees(throttle):
    item, scope = ratelimits.parse("3/minute"), unique()
    assert throttle.left(item, scope)[0] == 3
    assert throttle.hit([(item, scope)] * 3) is None
    index, at = throttle.hit([(ratelimits.parse("9/minute"), unique()), (item, scope)])
    assert index == 1 and time.time() < at <= time.time() + 61
    assert throttle.left(item, scope)[0] == 0


def test_slots_are_taken_all_or_none_and_lapse(throttle):
    a, b = unique(), unique()
    assert throttle.take([(a, 2), (b, 1)], "batch c1", 30) is None
    assert throttle.take([(a, 2), (b, 1)], "batch c1", 30) is None  # held already: kept
    full = throttle.take([(a, 2), (b, 1)], "batch c2", 30)
    assert full is not None and full[0] == 1
    assert throttle.free([(a, 2), (b, 1)]) == [1, 0]  # c2 took nothing
    throttle.release([a, b], "batch c1")
    assert throttle.free([(a, 2), (b, 1)]) == [2, 1]
    assert throttle.take([(b, 1)], "batch c3", 0.2) is None  # a lease of a killed worker
    time.sleep(0.3)
    assert throttle.take([(b, 1)], "batch c4", 30) is None  # it lapsed
    assert throttle.slots_used()[b] == 1


def test_fair_share_parks_past_the_cap_and_hands_the_next_turn_on(throttle):
    who = unique()
    parcels = [(f"c{i}", json.dumps({"member": f"b c{i}", "message": i})) for i in range(5)]
    assert throttle.admit_reads(who, 2, "b", parcels) == [True, True, False, False, False]
    assert throttle.parked(who, ["b c0", "b c2", "b c9"]) == [False, True, False]
    assert throttle.admit_reads(who, 2, "b", parcels[2:3]) == [False]  # parked once only
    turn = throttle.next_reads(who, 2, "b c0")
    assert [json.loads(p)["member"] for p in turn] == ["b c2"]
    assert throttle.parked(who, ["b c2"]) == [False]
    assert len(throttle.next_reads(who, 4)) == 2  # a larger cap takes the rest


def test_a_read_its_batch_sent_already_is_neither_admitted_nor_parked(throttle):
    who, batch = unique(), unique()
    throttle.client.hset(sent_key(batch), "c0", time.time())
    parcels = [(f"c{i}", json.dumps({"member": f"{batch} c{i}"})) for i in range(3)]
    assert throttle.admit_reads(who, 1, batch, parcels) == [False, True, False]
    assert throttle.parked(who, [f"{batch} c0", f"{batch} c2"]) == [False, True]


def test_held_batches_are_due_once_and_an_earlier_due_wins(throttle):
    batch = unique()
    throttle.hold_batch(batch, time.time() + 60)
    throttle.hold_batch(batch, time.time() - 1)
    throttle.hold_batch(batch, time.time() + 90)
    assert batch in throttle.due(time.time())
    assert batch not in throttle.due(time.time() + 120)


def test_a_call_sent_back_is_unsent(throttle):
    batch = unique()
    throttle.client.hset(sent_key(batch), "c1", time.time())
    throttle.unsend(batch, "c1")
    assert not throttle.client.hexists(sent_key(batch), "c1")


def test_the_sweep_finds_each_key_s_first_parked_read(throttle):
    who = unique()
    parcels = [(f"c{i}", json.dumps({"member": f"b c{i}", "message": i})) for i in range(3)]
    throttle.admit_reads(who, 1, "b", parcels)
    assert json.loads(throttle.waiting()[who])["member"] == "b c1"
    assert len(throttle.next_reads(who, 9)) == 2  # the stack's sweep must not find them


def test_the_worker_s_take_is_slots_and_hits_in_one_or_nothing(throttle):
    """`enter`: a call that finds a slot full consumes no hit of any window,
    and one that finds a window full keeps no slot and no other hit."""
    slot, wide, narrow = unique(), unique(), unique()
    many, one = ratelimits.parse("100/minute"), ratelimits.parse("1/minute")
    windows = [(many, wide), (one, narrow)]
    assert throttle.enter([(slot, 1)], "b c1", 30, windows) is None
    assert throttle.left(many, wide)[0] == 99 and throttle.left(one, narrow)[0] == 0
    index, at = throttle.enter([(slot, 1)], "b c2", 30, windows[:1])  # the slot is held
    assert index == 0 and time.time() < at <= time.time() + 31
    assert throttle.left(many, wide)[0] == 99  # its hit was taken back
    throttle.release([slot], "b c1")
    index, at = throttle.enter([(slot, 1)], "b c3", 30, windows)  # the narrow window is full
    assert index == 2 and time.time() < at <= time.time() + 61
    assert throttle.left(many, wide)[0] == 99 and throttle.free([(slot, 1)]) == [1]


def test_the_sender_s_look_is_every_window_slot_and_read_in_one(throttle):
    item, window, slot, who = ratelimits.parse("3/minute"), unique(), unique(), unique()
    throttle.hit([(item, window)])
    throttle.take([(slot, 2)], "b c9", 30)
    calls = [(f"c{i}", "") for i in range(3)]
    room, answer, marked = throttle.look([(item, window)], [(slot, 2)], (who, 2, "b", calls))
    assert marked == set()  # marks were not asked for
    assert room[window][0] == 2 and time.time() < room[window][1] <= time.time() + 61
    assert room[slot] == (1, 0.0)
    assert answer == "ssn"  # the third is not parked without its message: it is asked for
    assert throttle.parked(who, ["b c2"]) == [False]
    assert throttle.admit_reads(who, 2, "b", [("c2", json.dumps({"member": "b c2"}))]) == [False]
    assert throttle.parked(who, ["b c2"]) == [True]
    assert len(throttle.next_reads(who, 9)) == 1  # the stack's sweep must not find it


def test_the_sender_s_look_marks_what_it_is_given_and_the_reads_it_admits(throttle):
    """The look rides the send marks' round trip: calls are marked as
    `mark_sent` marks them, a read only if the fair share admits it."""
    who, batch = unique(), unique()
    throttle.client.hset(sent_key(batch), "w1", 1.0)  # another process sent it first
    calls = [(f"r{i}", "") for i in range(3)]
    room, answer, marked = throttle.look(
        [], [], (who, 2, batch, calls), None, (batch, ["w0", "w1"])
    )
    assert (room, answer) == ({}, "ssn")
    assert marked == {"w0", "r0", "r1"}
    assert set(throttle.client.hkeys(sent_key(batch))) == {b"w0", b"w1", b"r0", b"r1"}


def test_the_look_searches_a_window_only_when_its_list_could_hold_a_call_back(throttle):
    """A window's list keeps hits older than the window: its length is a
    count that may be too high, given unsearched only while it leaves room
    for every call the look is for; else the library's search counts."""
    item, window = ratelimits.parse("2 per 2 seconds"), unique()
    throttle.hit([(item, window)])
    time.sleep(1.2)
    throttle.hit([(item, window)])
    assert throttle.look([(item, window)], [], calls=[1])[0][window][0] == 0  # searched: full
    time.sleep(1.2)  # the first hit is older than the window now, still in its list
    assert throttle.client.llen(throttle.window_key(item, window)) == 2
    assert throttle.look([(item, window)], [], calls=[1])[0][window][0] == 1  # searched
    wide = ratelimits.parse("10/second")
    throttle.hit([(wide, window)])
    room = throttle.look([(wide, window)], [], calls=[3])[0][window]
    assert room[0] == 9  # room for all three: the list's length, unsearched
