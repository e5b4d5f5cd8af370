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
from redis.client import Pipeline
from redis.exceptions import NoScriptError

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
from runtime.transport.throttle_scripts import (
    ADMIT_READS,
    FREE,
    NEXT_READS,
    PARKED,
    TAKE,
    UNHIT,
)

IN_FLIGHT_SECONDS = 600.0  # a read in flight whose end never came frees its place after this
F = TypeVar("F", bound=Callable[..., Any])
Reads = tuple[str, int, str, Sequence[tuple[str, str]]]  # submitter, cap, batch, (call id, message)


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
        self.rates, self.storage = MovingWindowRateLimiter(storage), storage
        self._take = client.register_script(TAKE)
        self._free = client.register_script(FREE)
        self._parked = client.register_script(PARKED)
        self._admit_reads = client.register_script(ADMIT_READS)
        self._next_reads = client.register_script(NEXT_READS)
        self._unhit = client.register_script(UNHIT)
        self._scripts = [
            self._take,
            self._free,
            self._admit_reads,
            self._next_reads,
            self._unhit,
            storage.lua_moving_window,
            storage.lua_acquire_moving_window,
        ]
        self._loaded = False

    def _pipelined(self, build: Callable[[Pipeline], object]) -> list[Any]:
        """The answers of what `build` puts on a pipeline, in one round trip.
        Scripts go as EVALSHA: redis-py's `Script` on a pipeline asks SCRIPT
        EXISTS first, a round trip more each time. They are loaded once per
        process, and again if Redis lost them (a restart: then none of them
        ran, and the plain commands put here are idempotent)."""
        for attempt in (0, 1):
            if not self._loaded:
                with self.client.pipeline(transaction=False) as pipe:
                    for script in self._scripts:
                        pipe.script_load(script.script)
                    pipe.execute()
                self._loaded = True
            with self.client.pipeline(transaction=False) as pipe:
                build(pipe)
                try:
                    return pipe.execute()
                except NoScriptError:
                    if attempt:
                        raise
                    self._loaded = False
        raise AssertionError("unreachable")

    def _window_key(self, item: RateLimitItem, scope: str) -> str:
        return self.storage.prefixed_key(item.key_for(scope))

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

    @reached
    def look(
        self,
        windows: Sequence[tuple[RateLimitItem, str]],
        slots: Sequence[tuple[str, int]],
        reads: Reads | None = None,
    ) -> tuple[dict[str, tuple[int, float]], str]:
        """The sender's look, in one round trip: for each window's and each
        cap's scope, what it has left now and when it next frees one (a
        slot: 0, unknown); with `reads`, ADMIT_READS's answer for them (s,
        p, x or n, one a read), asked before the windows and slots are
        known, so the sender gives back the place of a read it then holds
        (`next_reads`). Reads given without their message are not parked
        but answered n: the sender sends their messages only then
        (`admit_reads`), so a key below its cap ships none."""
        if not windows and not slots and reads is None:
            return {}, ""
        now = time.time()

        def build(pipe: Pipeline) -> None:
            for item, scope in windows:  # `get_window_stats`'s script and arguments (limits 5.8)
                args = [now - item.get_expiry(), item.amount]
                pipe.evalsha(
                    self.storage.lua_moving_window.sha, 1, self._window_key(item, scope), *args
                )
            if slots:
                keys = [slots_key(scope) for scope, _ in slots]
                pipe.evalsha(self._free.sha, len(keys), *keys, now, *(cap for _, cap in slots))
            if reads is not None:
                pipe.evalsha(self._admit_reads.sha, 5, *self._admit(reads, now))

        found = self._pipelined(build)
        room = {}
        for (item, scope), window in zip(windows, found, strict=False):
            start, count = (float(window[0]), int(window[1])) if window else (now, 0)
            room[scope] = (item.amount - count, start + item.get_expiry())
        if slots:
            free = found[len(windows)]
            room |= {scope: (int(n), 0.0) for (scope, _), n in zip(slots, free, strict=True)}
        return room, (_text(found[-1]) if reads is not None else "")

    @reached
    def enter(
        self,
        slots: Sequence[tuple[str, int]],
        member: str,
        seconds: float,
        windows: Sequence[tuple[RateLimitItem, str]],
    ) -> tuple[int, float] | None:
        """The worker's take, in one round trip: a slot of each (scope, cap)
        for `seconds` and a hit of each window; or none of them, and (index
        in slots then windows, when it frees one) of the first that was full.
        The hits are taken in the same pipeline as the slots, so a call that
        finds a slot or a window full has its other hits taken back (`UNHIT`)
        and its slots freed: a call that waits consumes nothing."""
        now = time.time()
        keys = [self._window_key(item, scope) for item, scope in windows]

        def build(pipe: Pipeline) -> None:
            if slots:
                held = [slots_key(scope) for scope, _ in slots]
                args = [now, now + seconds, member, TTL_SECONDS, *(cap for _, cap in slots)]
                pipe.evalsha(self._take.sha, len(held), *held, *args)
            acquire = self.storage.lua_acquire_moving_window.sha  # `hit`'s script (limits 5.8)
            for key, (item, _) in zip(keys, windows, strict=True):
                pipe.evalsha(acquire, 1, key, now, item.amount, item.get_expiry(), 1)

        found = self._pipelined(build)
        slot, frees = found.pop(0) if slots else (0, 0)
        slot = int(slot) - 1  # TAKE's answer: 0 taken, else the full set's index + 1
        if slot < 0 and all(found):
            return None
        taken = [key for key, hit in zip(keys, found, strict=True) if hit]
        with self.client.pipeline(transaction=False) as pipe:
            if taken:
                pipe.evalsha(self._unhit.sha, len(taken), *taken, now)
            for scope, _ in slots if slot < 0 else ():
                pipe.zrem(slots_key(scope), member)
            pipe.execute()
        if slot >= 0:
            return slot, float(frees)
        index = [bool(hit) for hit in found].index(False)
        item, scope = windows[index]
        return len(slots) + index, self.rates.get_window_stats(item, scope).reset_time

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
        now = time.time()

        def build(pipe: Pipeline) -> None:
            for scope in scopes:
                pipe.zrem(slots_key(scope), member)
            if share is not None:
                args = [now, now + IN_FLIGHT_SECONDS, share[1], member]
                pipe.evalsha(self._next_reads.sha, 3, *_share_keys(share[0]), *args)

        if not scopes and share is None:
            return []
        found = self._pipelined(build)
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
        found = self._admit((principal, cap, batch_id, calls), time.time())
        answer = _text(self._admit_reads(keys=found[:5], args=found[5:]))
        return [c == "s" for c in answer]

    @staticmethod
    def _admit(reads: Reads, now: float) -> list[str | float | int]:
        """ADMIT_READS's keys then arguments."""
        principal, cap, batch_id, calls = reads
        keys = [*_share_keys(principal), sent_key(batch_id), PARKING]
        found = [*keys, now, now + IN_FLIGHT_SECONDS, cap, TTL_SECONDS, principal]
        for call_id, message in calls:
            found += [lease_member(batch_id, call_id), call_id, message]
        return found

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


def _text(answer: bytes | str) -> str:
    return answer.decode() if isinstance(answer, bytes) else answer


def _share_keys(principal: str) -> list[str]:
    return [in_flight_key(principal), parked_key(principal), parked_set_key(principal)]
