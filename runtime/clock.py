"""One clock for the cluster: Redis's (docs/architecture.md, "Leases", "One clock").

Hosts' clocks need not agree. A time one process writes and another judges (a
batch's deadline, an approval's expiry, when a call was sent, where a rate's
window starts, every time the ledger keeps) is on the state's clock: this
process's clock plus its offset from Redis's `TIME`, measured when the process
first reaches Redis and again every minute, half the round trip taken off.
Leases do better still: their scripts read `TIME` themselves. Before the first
measure, with Redis away, and in a process with no Redis (the in-memory
transport) the offset stays as it was, 0 at first: the host's clock.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime

log = logging.getLogger("toolrun.clock")
EVERY = 60.0  # seconds between measures of the offset
RETRY = 5.0  # seconds before measuring again after a measure failed
# Where Redis's TIME comes from (redis-py's `Redis.time`: seconds, microseconds).
_source: list[Callable[[], tuple[int, int]]] = []
_offset = [0.0]  # Redis's clock minus this host's, in seconds
_measured = [-math.inf]  # time.monotonic() of the last measure


def follow(read: Callable[[], tuple[int, int]]) -> None:
    """Take the state's clock from `read` from now on, measured at once."""
    _source[:] = [read]
    _measured[0] = -math.inf
    _measure()


def now() -> float:
    """Seconds since the epoch on the state's clock."""
    if _source and time.monotonic() - _measured[0] >= EVERY:
        _measure()
    return time.time() + _offset[0]


def utc() -> datetime:
    """`now()` as an aware UTC datetime (the ledger's times)."""
    return datetime.fromtimestamp(now(), UTC)


def offset() -> float:
    """The state's clock minus this host's, as last measured."""
    return _offset[0]


def _measure() -> None:
    _measured[0] = time.monotonic()
    try:
        before = time.time()
        seconds, micros = _source[0]()
        after = time.time()
    except Exception as error:  # noqa: BLE001 - the state away: the offset it had stands
        log.debug("cannot read the state's clock: %s", error)
        _measured[0] = time.monotonic() - EVERY + RETRY
        return
    _offset[0] = int(seconds) + int(micros) / 1_000_000 - (before + after) / 2
