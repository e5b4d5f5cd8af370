"""Rate limits, concurrency slots and fair share in Redis, across the cluster
(docs/architecture.md, "Flow control").

Rates are the `limits` library's moving windows in its Redis storage: a call
takes its hit right before its tool runs, and the sender only peeks at what a
window has left. A concurrency slot is a member of a sorted set scored by its
expiry (a lease): a worker SIGKILLed while holding one leaves it to lapse.
Fair share keeps at most N of one key's reads in the shared queue; the rest
wait parked in a list of that key, and the worker that ends one of the key's
reads sends the next (`next_reads`). Batches whose calls wait for a rate or
a slot are kept in `HELD` for the sweep to carry on when they are due.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis
from limits import RateLimitItem
from limits.storage import RedisStorage
from limits.strategies import MovingWindowRateLimiter

from runtime.errors import StateUnavailable
from runtime.transport.listener import LOST
from runtime.transport.names import (
    HELD,
    PARKING,
    TTL_SECONDS,
    in_flight_key,
    lease_member,
    parked_key,
    parked_set_key,
    sent_key,
    slots_key,
)

# Take one slot in each set, or none. KEYS: the slot sets; ARGV: now, expiry,
# member, ttl, then each set's cap. {0, 0}: taken (or held already); else
# {i, when the first slot of set i frees}.
TAKE = """
local now, expiry, member = tonumber(ARGV[1]), ARGV[2], ARGV[3]
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if not redis.call('ZSCORE', KEYS[i], member) then
    if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[4 + i]) then
      local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
      return {i, first[2]}
    end
  end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], expiry, member)
  redis.call('EXPIRE', KEYS[i], ARGV[4])
end
return {0, '0'}
"""
# Free slots of each set now. KEYS: the sets; ARGV: now, then each cap.
FREE = """
local out = {}
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ARGV[1])
  out[i] = tonumber(ARGV[1 + i]) - redis.call('ZCARD', KEYS[i])
end
return out
"""
# Which of a key's reads are parked already. KEYS: the parked set; ARGV: members.
PARKED = """
local out = {}
for i = 1, #ARGV do out[i] = redis.call('SISMEMBER', KEYS[1], ARGV[i]) end
return out
"""
# A key's reads: each goes in flight while fewer than the cap are, else it is
# parked; one its batch has sent already (a stale view of the batch) neither.
# KEYS: in flight, parked list, parked set, the batch's sent marks, the set of
# submitters parking; ARGV: now, expiry, cap, ttl, the submitter, then member,
# call id and message triples. Returns a
# string: s (send), p (parked) or x (sent already: left alone).
ADMIT_READS = """
local now, expiry, cap, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = {}
for i = 6, #ARGV, 3 do
  local member = ARGV[i]
  if redis.call('SISMEMBER', KEYS[3], member) == 1 then
    out[#out + 1] = 'p'
  elseif redis.call('HEXISTS', KEYS[4], ARGV[i + 1]) == 1 then
    out[#out + 1] = 'x'
  elseif redis.call('ZSCORE', KEYS[1], member) or redis.call('ZCARD', KEYS[1]) < cap then
    redis.call('ZADD', KEYS[1], expiry, member)
    out[#out + 1] = 's'
  else
    redis.call('RPUSH', KEYS[2], ARGV[i + 2])
    redis.call('SADD', KEYS[3], member)
    redis.call('SADD', KEYS[5], ARGV[5])  -- the submitter
    out[#out + 1] = 'p'
  end
end
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ttl) end
return table.concat(out)
"""
# A key's read ended (or never ran): its place goes to the reads parked
# next. KEYS: in flight, parked list, parked set; ARGV: now, expiry, cap,
# member. Returns the messages to send.
NEXT_READS = """
local now, expiry, cap = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if ARGV[4] ~= '' then redis.call('ZREM', KEYS[1], ARGV[4]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = {}
while redis.call('ZCARD', KEYS[1]) < cap do
  local message = redis.call('LPOP', KEYS[2])
  if not message then break end
  local member = cjson.decode(message)['member']
  redis.call('SREM', KEYS[3], member)
  redis.call('ZADD', KEYS[1], expiry, member)
  out[#out + 1] = message
end
return out
"""
IN_FLIGHT_SECONDS = 600.0  # a read in flight whose end never came frees its place after this
F = TypeVar("F", bound=Callable[..., Any])


def reached(method: F) -> F:
    """Redis's connection errors, as toolrun's (`StateUnavailable`)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except LOST as error:
            raise StateUnavailable(f"flow control: {error}") from error

    return wrapper  # type: ignore[return-value]


class Throttle:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        storage = RedisStorage("redis://", connection_pool=client.connection_pool)
        self.rates = MovingWindowRateLimiter(storage)
        self._take = client.register_script(TAKE)
        self._free = client.register_script(FREE)
        self._parked = client.register_script(PARKED)
        self._admit_reads = client.register_script(ADMIT_READS)
        self._next_reads = client.register_script(NEXT_READS)

    # Rates.
    @reached
    def left(self, item: RateLimitItem, scope: str) -> tuple[int, float]:
        """What the window of `scope` has left now, and when it next frees one."""
        stats = self.rates.get_window_stats(item, scope)
        return stats.remaining, stats.reset_time

    @reached
    def hit(self, items: Sequence[tuple[RateLimitItem, str]]) -> tuple[int, float] | None:
        """Take one hit of each window; (index, when it frees one) of the
        first that is full. A full one found after others were hit leaves
        those hits taken: the error is on the side of fewer calls."""
        for index, (item, scope) in enumerate(items):
            if not self.rates.hit(item, scope):
                return index, self.rates.get_window_stats(item, scope).reset_time
        return None

    # Concurrency slots.
    @reached
    def take(
        self, slots: Sequence[tuple[str, int]], member: str, seconds: float
    ) -> tuple[int, float] | None:
        """Take a slot of each (scope, cap) for `seconds`, or none; (index,
        when one frees) of the first that is full."""
        if not slots:
            return None
        now = time.time()
        keys = [slots_key(scope) for scope, _ in slots]
        args = [now, now + seconds, member, TTL_SECONDS, *(cap for _, cap in slots)]
        index, when = self._take(keys=keys, args=args)
        return None if int(index) == 0 else (int(index) - 1, float(when))

    @reached
    def free(self, slots: Sequence[tuple[str, int]]) -> list[int]:
        """Free slots of each (scope, cap) now."""
        if not slots:
            return []
        keys = [slots_key(scope) for scope, _ in slots]
        return [int(n) for n in self._free(keys=keys, args=[time.time(), *(c for _, c in slots)])]

    @reached
    def release(self, scopes: Sequence[str], member: str) -> None:
        if scopes:
            with self.client.pipeline(transaction=False) as pipe:
                for scope in scopes:
                    pipe.zrem(slots_key(scope), member)
                pipe.execute()

    @reached
    def finish(
        self, scopes: Sequence[str], member: str, share: tuple[str, int] | None
    ) -> list[str]:
        """A call's delivery is over: free its slots and, with `share` (its
        submitter, the cap), its place in flight; the parked reads whose turn
        it is now, taken in flight. One round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            for scope in scopes:
                pipe.zrem(slots_key(scope), member)
            if share is not None:
                now = time.time()
                args = [now, now + IN_FLIGHT_SECONDS, share[1], member]
                self._next_reads(keys=_share_keys(share[0]), args=args, client=pipe)
            found = pipe.execute() if len(pipe) else []
        if share is None:
            return []
        return [m.decode() if isinstance(m, bytes) else m for m in found[-1]]

    @reached
    def slots_used(self) -> dict[str, int]:
        """Slots held now by scope (`/metrics`)."""
        now = time.time()
        keys = list(self.client.scan_iter(match=slots_key("*"), count=500))
        with self.client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.zcount(key, now, "+inf")
            counts = pipe.execute()
        prefix = len(slots_key(""))
        return {k.decode()[prefix:]: int(n) for k, n in zip(keys, counts, strict=True)}

    @reached
    def windows_open(self, prefix: str) -> list[str]:
        """The scopes of rate windows that have hits now, starting `prefix`
        (`/metrics`); the library keys them "LIMITS:LIMITER/<scope>/<n>/<m>/<unit>"."""
        keys = self.client.scan_iter(match=f"LIMITS:LIMITER/{prefix}*", count=500)
        return sorted({k.decode().removeprefix("LIMITS:LIMITER/").rsplit("/", 3)[0] for k in keys})

    @reached
    def shares(self) -> dict[str, tuple[int, int]]:
        """Each submitter's reads in flight and parked (`/metrics`)."""
        found = {}
        head, tail = in_flight_key("\0").split("\0")
        for key in self.client.scan_iter(match=in_flight_key("*"), count=500):
            who = key.decode().removeprefix(head).removesuffix(tail)
            found[who] = (
                int(self.client.zcount(key, time.time(), "+inf")),
                int(self.client.llen(parked_key(who))),
            )
        return found

    # Fair share of the reads queue.
    @reached
    def parked(self, principal: str, members: Sequence[str]) -> list[bool]:
        if not members:
            return []
        found = self._parked(keys=[parked_set_key(principal)], args=list(members))
        return [bool(n) for n in found]

    @reached
    def admit_reads(
        self, principal: str, cap: int, batch_id: str, calls: Sequence[tuple[str, str]]
    ) -> list[bool]:
        """For each (call id, message JSON) of a batch: True to send now;
        False parked, or sent already by another process."""
        if not calls:
            return []
        now = time.time()
        args: list[str | float | int] = [now, now + IN_FLIGHT_SECONDS, cap, TTL_SECONDS, principal]
        for call_id, message in calls:
            args += [lease_member(batch_id, call_id), call_id, message]
        keys = [*_share_keys(principal), sent_key(batch_id), PARKING]
        answer = self._admit_reads(keys=keys, args=args)
        return [c == "s" for c in (answer.decode() if isinstance(answer, bytes) else answer)]

    @reached
    def waiting(self) -> dict[str, str]:
        """Each submitter with parked reads, and the first of them (the sweep
        moves them on if no end of theirs did); one whose reads have all
        gone leaves the set."""
        found = {}
        for raw in self.client.smembers(PARKING):
            who = raw.decode()
            first = self.client.lindex(parked_key(who), 0)
            if first is None:
                self.client.srem(PARKING, who)
            else:
                found[who] = first.decode()
        return found

    @reached
    def next_reads(self, principal: str, cap: int, member: str = "") -> list[str]:
        """`member` (a read of `principal`) left the queue: the parked
        messages whose turn it is now, taken in flight."""
        now = time.time()
        args = [now, now + IN_FLIGHT_SECONDS, cap, member]
        found = self._next_reads(keys=_share_keys(principal), args=args)
        return [m.decode() if isinstance(m, bytes) else m for m in found]

    # Batches waiting for a rate or a slot.
    @reached
    def unsend(self, batch_id: str, call_id: str) -> None:
        """A call a worker sent back to wait: unsent, so the batch sends it again."""
        self.client.hdel(sent_key(batch_id), call_id)

    @reached
    def hold_batch(self, batch_id: str, due: float) -> None:
        """Carry the batch on at `due` (an earlier due stays)."""
        self.client.zadd(HELD, {batch_id: due}, lt=True)
        self.client.zadd(HELD, {batch_id: due}, nx=True)

    @reached
    def due(self, now: float) -> list[str]:
        """Batches due now, taken off the list (carrying one on holds it again
        if it must still wait)."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.zrangebyscore(HELD, "-inf", now)
            pipe.zremrangebyscore(HELD, "-inf", now)
            found, _ = pipe.execute()
        return [b.decode() for b in found]


def _share_keys(principal: str) -> list[str]:
    return [in_flight_key(principal), parked_key(principal), parked_set_key(principal)]
