"""Leases in Redis (docs/architecture.md, "Leases"): a running call's lease,
renewed while it runs and released by its end; the sweep's lease, held by one
process at a time; and the epoch that says whether Redis lost what it held.
`RedisState` (runtime/transport/redis_state.py) is built on this.

Every time a lease is written with or judged by is Redis's own (`TIME` in a
script, or read in the same round trip), never a host's: hosts whose clocks
disagree by more than a lease still agree on which leases ran out."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis

from runtime.errors import StateUnavailable
from runtime.keyspace.names import (
    EPOCH_KEY,
    LEASES,
    SERVER_KEY,
    SWEEP_LOCK,
    TTL_SECONDS,
    call_of_lease,
    lease_member,
    results_key,
    unheld_key,
)
from runtime.keyspace.scripted import LOST
from runtime.types import ToolResult

# Redis's clock, in seconds, as a script's first step (a script may read TIME
# before it writes). Times are written and go back as text to the microsecond:
# Redis truncates a Lua number, and Lua's own text of one keeps 14 digits.
NOW = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local function text(seconds) return string.format('%.6f', seconds) end
"""


def clocked(script: str) -> str:
    """`script` with `now` (Redis's clock) and `text` (a time as Redis keeps
    it) defined first."""
    return NOW + script


# A call's lease taken: KEYS = the leases' set, the call's results hash;
# ARGV = seconds, member, call id. The end published for it, if any.
HOLD = clocked("""
redis.call('ZADD', KEYS[1], 'GT', text(now + tonumber(ARGV[1])), ARGV[2])
return redis.call('HGET', KEYS[2], ARGV[3])
""")
# Leases of running calls: KEYS = the leases' set, then each call's results hash;
# ARGV = seconds, then each call's member and id.
RENEW = clocked("""
local expiry = text(now + tonumber(ARGV[1]))
for i = 2, #KEYS do
  if redis.call('HEXISTS', KEYS[i], ARGV[2 * i - 1]) == 0 then
    redis.call('ZADD', KEYS[1], 'GT', expiry, ARGV[2 * i - 2])
  end
end
return 0
""")
# The leases run out now: KEYS = the leases' set.
LAPSED = clocked("""
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', text(now))
""")
# How long each claimed call has had no lease: KEYS = the batch's unheld
# marks, the epoch; ARGV = the marks' TTL, then call ids. A call is marked
# the first time it is asked for; the time since the epoch caps it (the
# state started empty: its holders are given a lease's time to renew).
UNHELD = clocked("""
local epoch = tonumber(redis.call('GET', KEYS[2])) or now
local found = {}
for i = 2, #ARGV do
  redis.call('HSETNX', KEYS[1], ARGV[i], text(now))
  local since = tonumber(redis.call('HGET', KEYS[1], ARGV[i])) or now
  found[i - 1] = text(now - math.max(since, epoch))
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return found
""")
# What a call's holder has left of its lease, as the advancer would judge it
# now: KEYS = the leases' set, the batch's unheld marks, the epoch, the
# batch's results hash; ARGV = member, call id, seconds. Its lease's seconds
# left; without a lease, a lease's time from when the judge first saw it
# unheld (or from the epoch if later; a whole lease if not seen yet); -1 once
# its end is published (someone else ended it).
LEFT = clocked("""
if redis.call('HEXISTS', KEYS[4], ARGV[2]) == 1 then return '-1' end
local expiry = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if expiry then return text(expiry - now) end
local since = tonumber(redis.call('HGET', KEYS[2], ARGV[2]))
if not since then return ARGV[3] end
local epoch = tonumber(redis.call('GET', KEYS[3])) or now
return text(math.max(since, epoch) + tonumber(ARGV[3]) - now)
""")
# The sweep's lease: taken if free, renewed if this holder has it, in one step.
HOLD_SWEEP = """
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if held then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
# Whether Redis lost what it held, in one step: KEYS = the epoch, the last
# server's run id. The epoch is set if missing (emptied); the run
# id read from INFO (none where INFO is refused) replaces the last one seen.
EPOCH_LOOK = clocked("""
local emptied = redis.call('SET', KEYS[1], text(now), 'NX')
local info = redis.pcall('INFO', 'server')
local server = type(info) == 'string' and string.match(info, 'run_id:(%w+)') or false
local before = false
if server then before = redis.call('SET', KEYS[2], server, 'GET') end
return {emptied and 1 or 0, before, server}
""")
RELEASE_SWEEP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@contextmanager
def reaching(what: str) -> Iterator[None]:
    """Redis's connection errors, as toolrun's."""
    try:
        yield
    except LOST as error:
        raise StateUnavailable(f"{what}: {error}") from error


class Leases:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._hold = client.register_script(HOLD)
        self._renew = client.register_script(RENEW)
        self._lapsed = client.register_script(LAPSED)
        self._unheld = client.register_script(UNHELD)
        self._hold_sweep = client.register_script(HOLD_SWEEP)
        self._release_sweep = client.register_script(RELEASE_SWEEP)
        self._lost = client.register_script(EPOCH_LOOK)
        self._left = client.register_script(LEFT)

    def hold(self, batch_id: str, call_id: str, seconds: float) -> ToolResult | None:
        keys = [LEASES, results_key(batch_id)]
        with reaching(f"cannot take the lease of {call_id}"):
            stored = self._hold(keys=keys, args=[seconds, lease_member(batch_id, call_id), call_id])
        return ToolResult.model_validate_json(stored) if stored else None

    def renew(self, calls: list[tuple[str, str]], seconds: float) -> None:
        """Renew in one step; a lease lost with the state comes back, one whose
        call has published its end does not (the end released it)."""
        if not calls:
            return
        keys = [LEASES, *(results_key(b) for b, _ in calls)]
        args: list = [seconds]
        for batch_id, call_id in calls:
            args += [lease_member(batch_id, call_id), call_id]
        with reaching("cannot renew the leases of running calls"):
            self._renew(keys=keys, args=args)

    def release(self, batch_id: str, call_id: str) -> None:
        with reaching(f"cannot release the lease of {call_id}"):
            self.client.zrem(LEASES, lease_member(batch_id, call_id))

    def left(self, batch_id: str, call_id: str, seconds: float) -> float:
        keys = [LEASES, unheld_key(batch_id), EPOCH_KEY, results_key(batch_id)]
        with reaching(f"cannot read the lease of {call_id}"):
            found = self._left(keys=keys, args=[lease_member(batch_id, call_id), call_id, seconds])
        return float(found)

    def holds(self, batch_id: str, call_ids: list[str]) -> dict[str, float]:
        if not call_ids:
            return {}
        with (
            reaching(f"batch {batch_id}: cannot read its leases"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            pipe.zmscore(LEASES, [lease_member(batch_id, c) for c in call_ids])
            pipe.time()
            found, clock = pipe.execute()
        return left(call_ids, found, clock)

    def lapsed(self) -> set[tuple[str, str]]:
        with reaching("cannot read the leases"):
            members = self._lapsed(keys=[LEASES])
        return {call_of_lease(m.decode()) for m in members}

    def unheld(self, batch_id: str, call_ids: list[str]) -> dict[str, float]:
        if not call_ids:
            return {}
        keys = [unheld_key(batch_id), EPOCH_KEY]
        with reaching(f"batch {batch_id}: cannot read its claims' leases"):
            found = self._unheld(keys=keys, args=[TTL_SECONDS, *call_ids])
        return {c: float(age) for c, age in zip(call_ids, found, strict=True)}

    # The sweep.
    def hold_sweep(self, holder: str, seconds: float) -> bool:
        with reaching("cannot take the sweep's lease"):
            return bool(self._hold_sweep(keys=[SWEEP_LOCK], args=[holder, int(seconds * 1000)]))

    def release_sweep(self, holder: str) -> None:
        with reaching("cannot release the sweep's lease"):
            self._release_sweep(keys=[SWEEP_LOCK], args=[holder])

    def lost(self, holder: str) -> bool:
        """A missing epoch key means Redis lost what it held; the new one says
        when. Another server than at the last look (a Sentinel failover to a
        replica, a restart from the append-only file) may have lost the last
        writes before it took over: open batches are looked at again then too.
        One round trip: the sweep asks every second."""
        with reaching("cannot read the epoch"):
            emptied, before, server = self._lost(keys=[EPOCH_KEY, SERVER_KEY])
        return bool(emptied) or (server is not None and before not in (None, server))


def left(call_ids: list[str], found: list, clock: tuple[int, int]) -> dict[str, float]:
    """Seconds left of each found lease (none or less: it ran out), on the
    clock of the Redis that `clock` (its TIME) came from."""
    now = clock[0] + clock[1] / 1_000_000
    return {c: until - now for c, until in zip(call_ids, found, strict=True) if until is not None}
