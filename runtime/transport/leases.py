"""Leases in Redis (docs/architecture.md, "Leases"): a running call's lease,
renewed while it runs and released by its end; the sweep's lease, held by one
process at a time; and the epoch that says whether Redis lost what it held.
`RedisState` (runtime/transport/redis_state.py) is built on this."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from runtime.errors import StateUnavailable
from runtime.transport.listener import LOST
from runtime.transport.names import (
    EPOCH_KEY,
    LEASES,
    SERVER_KEY,
    SWEEP_LOCK,
    call_of_lease,
    lease_member,
    results_key,
)
from runtime.types import ToolResult

# Leases of running calls: KEYS = the leases' set, then each call's results hash;
# ARGV = the new expiry, then each call's member and id.
RENEW = """
for i = 2, #KEYS do
  if redis.call('HEXISTS', KEYS[i], ARGV[2 * i - 1]) == 0 then
    redis.call('ZADD', KEYS[1], 'GT', ARGV[1], ARGV[2 * i - 2])
  end
end
return 0
"""
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
# server's run id; ARGV = now. The epoch is set if missing (emptied); the run
# id read from INFO (none where INFO is refused) replaces the last one seen.
EPOCH_LOOK = """
local emptied = redis.call('SET', KEYS[1], ARGV[1], 'NX')
local info = redis.pcall('INFO', 'server')
local server = type(info) == 'string' and string.match(info, 'run_id:(%w+)') or false
local before = false
if server then before = redis.call('SET', KEYS[2], server, 'GET') end
return {emptied and 1 or 0, before, server}
"""
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
        self._renew = client.register_script(RENEW)
        self._hold_sweep = client.register_script(HOLD_SWEEP)
        self._release_sweep = client.register_script(RELEASE_SWEEP)
        self._lost = client.register_script(EPOCH_LOOK)

    def hold(self, batch_id: str, call_id: str, seconds: float) -> ToolResult | None:
        until = time.time() + seconds
        with reaching(f"cannot take the lease of {call_id}"):
            with self.client.pipeline(transaction=False) as pipe:
                pipe.zadd(LEASES, {lease_member(batch_id, call_id): until}, gt=True)
                pipe.hget(results_key(batch_id), call_id)
                _, stored = pipe.execute()
        return ToolResult.model_validate_json(stored) if stored else None

    def renew(self, calls: list[tuple[str, str]], seconds: float) -> None:
        """Renew in one step; a lease lost with the state comes back, one whose
        call has published its end does not (the end released it)."""
        if not calls:
            return
        keys = [LEASES, *(results_key(b) for b, _ in calls)]
        args = [time.time() + seconds]
        for batch_id, call_id in calls:
            args += [lease_member(batch_id, call_id), call_id]
        with reaching("cannot renew the leases of running calls"):
            self._renew(keys=keys, args=args)

    def release(self, batch_id: str, call_id: str) -> None:
        with reaching(f"cannot release the lease of {call_id}"):
            self.client.zrem(LEASES, lease_member(batch_id, call_id))

    def holds(self, batch_id: str, call_ids: list[str]) -> dict[str, float]:
        if not call_ids:
            return {}
        with reaching(f"batch {batch_id}: cannot read its leases"):
            found = self.client.zmscore(LEASES, [lease_member(batch_id, c) for c in call_ids])
        return {c: until for c, until in zip(call_ids, found, strict=True) if until is not None}

    def lapsed(self, now: float) -> set[tuple[str, str]]:
        with reaching("cannot read the leases"):
            members = self.client.zrangebyscore(LEASES, "-inf", now)
        return {call_of_lease(m.decode()) for m in members}

    def reset_at(self) -> float:
        with reaching("cannot read the epoch"):
            found = self.client.get(EPOCH_KEY)
        try:
            return float(found) if found else time.time()
        except ValueError:  # an epoch of an older toolrun: it has been a while
            return 0.0

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
            emptied, before, server = self._lost(
                keys=[EPOCH_KEY, SERVER_KEY], args=[str(time.time())]
            )
        return bool(emptied) or (server is not None and before not in (None, server))
