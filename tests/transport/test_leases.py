"""When the state's Redis counts as having lost what it held, so that the
sweep looks at every open batch again: it started empty (no epoch key), or
another server answers than at the last look (a Sentinel failover, a restart
from the append-only file, which may miss the last writes). Real redis-server."""

from __future__ import annotations

import os
import time

import pytest
import redis

from runtime.keyspace.names import results_key
from runtime.settings import Settings
from runtime.stack.processes import spawn, stop_process, wait_for_redis
from runtime.stack.redis_server import find_redis_server, redis_needles, start_redis
from runtime.transport.leases import Leases
from tests.support.waiting import wait_for

pytestmark = pytest.mark.server


def test_an_empty_start_and_another_server_each_count_as_lost_once(tmp_path):
    settings = Settings(home=tmp_path)
    url, pid = start_redis(settings, appendonly=True)
    try:
        state = Leases(redis.Redis.from_url(url))
        assert state.lost("me")  # started empty
        assert not state.lost("me")
        state.client.config_set("appendfsync", "always")
        assert not state.lost("me")
        stop_process(pid, needles=redis_needles(url))  # SIGTERM: the file is written
        config = tmp_path.resolve() / "redis" / "redis.conf"
        log = tmp_path.resolve() / "logs" / "redis.log"
        pid = spawn([find_redis_server(settings), str(config)], log=log, env=os.environ)
        wait_for_redis(url, pid=pid, log=log, timeout=30)
        assert state.client.exists("toolrun:epoch")  # the data came back ...
        assert state.lost("me")  # ... from another server run: look again, once
        assert not state.lost("me")
    finally:
        stop_process(pid, needles=redis_needles(url))


def test_the_look_at_the_epoch_is_one_round_trip(tmp_path):
    """The sweep asks every second, an idle cluster too."""
    url, pid = start_redis(Settings(home=tmp_path))
    try:
        state = Leases(redis.Redis.from_url(url))
        state.lost("me")  # the script is loaded
        with redis.Redis.from_url(url).monitor() as monitor:
            assert not state.lost("me")
            state.client.ping()  # the end of what it sent
            sent = []
            while not (command := monitor.next_command())["command"].startswith("PING"):
                if command["client_type"] != "lua":
                    sent.append(command["command"])
        assert len(sent) == 1 and sent[0].startswith("EVALSHA"), sent
    finally:
        stop_process(pid, needles=redis_needles(url))


@pytest.fixture
def leases(tmp_path):
    url, pid = start_redis(Settings(home=tmp_path))
    try:
        yield Leases(redis.Redis.from_url(url))
    finally:
        stop_process(pid, needles=redis_needles(url))


def test_leases_are_written_and_judged_on_redis_s_clock_not_the_host_s(leases, monkeypatch):
    """This process's clock an hour off either way changes nothing: a lease
    taken or renewed for 60 s has about 60 s left, and has not lapsed."""
    real = time.time
    for skew in (-3600.0, 3600.0):
        monkeypatch.setattr(time, "time", lambda skew=skew: real() + skew)
        leases.hold("b", "held", 60)
        leases.renew([("b", "renewed")], 60)
        left = leases.holds("b", ["held", "renewed", "none"])
        assert set(left) == {"held", "renewed"}
        assert all(55 < seconds <= 60 for seconds in left.values()), left
        assert leases.lapsed() == set()
        leases.release("b", "held")
        leases.release("b", "renewed")
    leases.hold("b", "short", 0.001)
    wait_for(lambda: leases.lapsed() == {("b", "short")}, what="the short lease lapsed")
    assert leases.holds("b", ["short"])["short"] <= 0


def test_a_claim_without_a_lease_is_timed_from_its_first_look_or_the_epoch(leases):
    """`unheld`: how long each claimed call has been seen without a lease, on
    Redis's clock, from the first time it was asked for, or from the epoch
    (the state started empty) if that is later."""
    leases.lost("me")  # the epoch: now
    first = leases.unheld("b", ["c"])
    assert 0 <= first["c"] < 5
    # Half a second on: more than the reads below take, on a busy machine too.
    later = wait_for(
        lambda: (found := leases.unheld("b", ["c", "d"]))["c"] > first["c"] + 0.5 and found
    )
    assert later["d"] < later["c"]  # d is timed from its own first look
    leases.client.delete("toolrun:epoch")
    leases.lost("me")  # started empty again: every claim is given a fresh lease's time
    assert leases.unheld("b", ["c"])["c"] < later["c"]


def test_a_holder_reads_what_its_lease_has_left_as_the_judge_would(leases):
    """`left`: the seconds before the advancer may judge the call's holder
    gone: its lease's seconds left; with no lease, a whole lease until the
    judge has seen it unheld, then a lease from that look (or the epoch);
    none once its end is published by anyone."""
    leases.lost("me")  # the epoch: now
    assert leases.left("b", "c", 6) == 6  # taken right after the claim: not judged yet
    leases.unheld("b", ["c"])  # the judge's first look at it without a lease
    seen = leases.left("b", "c", 6)
    assert 5 < seen <= 6
    wait_for(lambda: leases.left("b", "c", 6) < seen, what="the unheld time running")
    leases.hold("b", "c", 60)
    assert 55 < leases.left("b", "c", 6) <= 60
    leases.hold("b", "short", 0.001)
    wait_for(lambda: leases.left("b", "short", 6) <= 0, what="the short lease lapsed")
    leases.client.hset(results_key("b"), "c", "{}")  # its end published elsewhere
    assert leases.left("b", "c", 6) < 0
