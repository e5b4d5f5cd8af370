"""The state's clock (docs/architecture.md, "Leases", "One clock"): this host's clock
plus its offset from Redis's TIME, measured at once, again every minute, and
kept as it was while Redis is away. Against a real redis-server in
tests/integration/test_leases.py (a sweeping worker a minute ahead)."""

from __future__ import annotations

import time

import pytest

from runtime import clock


@pytest.fixture(autouse=True)
def _host_clock():
    """A process that followed a Redis before (another test's stack) follows none here."""
    saved = (list(clock._source), clock._offset[0], clock._measured[0])
    clock._source.clear()
    clock._offset[0] = 0.0
    yield
    clock._source[:], clock._offset[0], clock._measured[0] = saved


def redis_ahead_by(seconds: float):
    def read() -> tuple[int, int]:
        moment = time.time() + seconds
        return int(moment), int((moment % 1) * 1_000_000)

    return read


def test_with_no_state_it_is_the_hosts_clock():
    assert abs(clock.now() - time.time()) < 0.5
    assert clock.offset() == 0.0


def test_it_reads_the_states_clock_however_far_the_host_is_off():
    clock.follow(redis_ahead_by(90.0))
    assert abs(clock.offset() - 90.0) < 0.5
    assert abs(clock.now() - (time.time() + 90.0)) < 0.5
    assert abs(clock.utc().timestamp() - (time.time() + 90.0)) < 0.5


def test_the_offset_stands_while_the_state_is_away():
    clock.follow(redis_ahead_by(-40.0))

    def away() -> tuple[int, int]:
        raise ConnectionError("Redis is restarting")

    clock._source[:] = [away]
    clock._measured[0] = time.monotonic() - clock.EVERY  # due
    assert abs(clock.now() - (time.time() - 40.0)) < 0.5
    assert time.monotonic() - clock._measured[0] > clock.EVERY - clock.RETRY - 1  # tried again soon
