"""The fence (`runtime/execution/fence.py`, docs/architecture.md "Leases"): a
pool process whose call's lease is not renewed kills itself before the lease
lapses; one whose lease is renewed runs its call to the end. A real
redis-server, and a forked process standing for the pool process."""

from __future__ import annotations

import os
import signal
import time

import pytest
import redis

from runtime import sessions
from runtime.execution.fence import fenced
from runtime.settings import Settings
from runtime.stack.processes import stop_process
from runtime.stack.redis_server import redis_needles, start_redis
from runtime.transport.leases import Leases

pytestmark = pytest.mark.server
LEASE = 3.0


@pytest.fixture
def redis_url(tmp_path):
    url, pid = start_redis(Settings(home=tmp_path))
    sessions.configure(tmp_path / "sessions")  # as a worker's main process does
    try:
        yield url
    finally:
        sessions.configure(None)
        stop_process(pid, needles=redis_needles(url))


def fenced_process(url: str, seconds: float) -> int:
    """A forked process running a call of `seconds` under the fence."""
    child = os.fork()
    if child == 0:
        try:
            with fenced(Leases(redis.Redis.from_url(url)), "b", "c", LEASE):
                time.sleep(seconds)
        finally:
            os._exit(0)
    return child


def test_a_call_whose_lease_is_not_renewed_stops_before_it_lapses(redis_url):
    leases = Leases(redis.Redis.from_url(redis_url))
    leases.hold("b", "c", LEASE)
    child = fenced_process(redis_url, 4 * LEASE)
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    assert leases.holds("b", ["c"])["c"] > 0, "the process outlived its lease"


def test_a_call_whose_lease_is_renewed_runs_to_its_end(redis_url):
    leases = Leases(redis.Redis.from_url(redis_url))
    leases.hold("b", "c", LEASE)
    child = fenced_process(redis_url, 2 * LEASE)
    while (waited := os.waitpid(child, os.WNOHANG)) == (0, 0):
        leases.renew([("b", "c")], LEASE)  # the main process's heartbeat
        time.sleep(LEASE / 4)
    _, status = waited
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
