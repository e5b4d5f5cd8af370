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

import json
from collections.abc import Sequence
from typing import Any

import redis
from limits import RateLimitItem
from limits.storage import RedisStorage
from limits.strategies import MovingWindowRateLimiter
from redis.client import Pipeline

from runtime import clock
from runtime.flow.fair_share import FairShare, Reads, _text
from runtime.flow.riders import Entry, Finish
from runtime.flow.throttle_scripts import ENTER, FINISH, FREE, LOOK, LOOK_AND_ADMIT
from runtime.keyspace.names import HELD, TTL_SECONDS, plan_key, sent_key, slots_key
from runtime.keyspace.scripted import reached

__all__ = ["Entry", "Finish", "Reads", "Throttle"]


class Throttle(FairShare):
    """Rates, slots and held batches; fair share's reads (`FairShare`)."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        storage = RedisStorage("redis://", connection_pool=client.connection_pool)
        self.rates, self.storage = MovingWindowRateLimiter(storage), storage
        self._free = self.script(FREE)
        self.look_script, self.enter_script = self.script(LOOK), self.script(ENTER)
        self.look_and_admit = self.script(LOOK_AND_ADMIT)
        self.finish_script = self.script(FINISH)
        self._window_keys: dict[tuple[int, str], str] = {}

    def window_key(self, item: RateLimitItem, scope: str) -> str:
        """The library's key of `scope`'s window (kept: a call asks it each time)."""
        found = self._window_keys.get((id(item), scope))
        if found is None:
            if len(self._window_keys) >= 4096:
                self._window_keys.clear()
            found = self.storage.prefixed_key(item.key_for(scope))
            self._window_keys[id(item), scope] = found
        return found

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
        copy: tuple[str, dict[str, Any]] | None = None,
        marks: tuple[str, Sequence[str]] | None = None,
        calls: Sequence[int] | None = None,
    ) -> tuple[dict[str, tuple[int, float]], str, set[str]]:
        """The sender's look, in one round trip: for each window's and each
        cap's scope, what it has left now and when it next frees one (a
        slot: 0, unknown); with `reads`, ADMIT_READS's answer for them (s,
        p, x or n, one a read), asked before the windows and slots are
        known, so the sender gives back the place of a read it then holds
        (`next_reads`). Reads given without their message are not parked
        but answered n: the sender sends their messages only then
        (`admit_reads`), so a key below its cap ships none. `copy`: (batch
        id, its plan's copy), kept first in the same round trip. `marks`:
        (batch id, call ids) each marked sent now unless it was (as
        `mark_sent` marks), after the look in the same round trip, the reads
        too as ADMIT_READS admits them: the ids marked now come third (the
        sender takes back the marks of those it then holds or ends). Should
        Redis have lost the scripts (a restart), the marks of the first try
        stand and the second finds them taken: those calls are sent again
        by the sweep, as a lost message is. `calls`: for each window, the
        calls the look is for (LOOK need not search a window with room for
        them all); None: each window is searched."""
        if not windows and not slots and reads is None and copy is None and marks is None:
            return {}, "", set()
        now = clock.now()

        keys, args = self._look_arguments(windows, slots, calls, now)
        marking = marks[1] if marks is not None else ()

        def build(pipe: Pipeline) -> None:
            if copy is not None:
                pipe.set(plan_key(copy[0]), json.dumps(copy[1]), ex=TTL_SECONDS)
            if reads is not None:  # one command for both
                admit = self._admit(reads, now, mark=marks is not None)
                both = [len(keys), len(args), *args, *admit[5:]]
                pipe.evalsha(self.look_and_admit.sha, len(keys) + 5, *keys, *admit[:5], *both)
            elif keys:
                pipe.evalsha(self.look_script.sha, len(keys), *keys, *args)
            if marking:
                sent = sent_key(marks[0])
                for call_id in marking:
                    pipe.hsetnx(sent, call_id, now)
                pipe.expire(sent, TTL_SECONDS)

        found = self._pipelined(build)[copy is not None :]
        marked = set()
        if marking:
            answers, found = found[-len(marking) - 1 : -1], found[: -len(marking) - 1]
            marked = {c for c, new in zip(marking, answers, strict=True) if new}
        room, admitted = {}, ""
        if reads is not None:
            *seen, last = found[0]
            admitted = _text(last)
        elif keys:
            seen = found[0]
        if keys:
            room = _room(windows, slots, seen, now)
        if marks is not None and reads is not None:
            marked |= {c for (c, _), a in zip(reads[3], admitted, strict=True) if a == "s"}
        return room, admitted, marked

    def _look_arguments(
        self,
        windows: Sequence[tuple[RateLimitItem, str]],
        slots: Sequence[tuple[str, int]],
        calls: Sequence[int] | None,
        now: float,
    ) -> tuple[list[str], list[Any]]:
        """LOOK's keys (each window's, then each cap's slots) and arguments
        (the time, how many windows, each window's size, length and the calls
        it must have room for, then each cap)."""
        if not windows and not slots:
            return [], []
        keys = [self.window_key(item, scope) for item, scope in windows]
        keys += [slots_key(scope) for scope, _ in slots]
        args: list[Any] = [now, len(windows)]
        for index, (item, _) in enumerate(windows):
            needed = calls[index] if calls is not None else item.amount + 1
            args += [item.amount, item.get_expiry(), needed]
        args += [cap for _, cap in slots]
        return keys, args

    @reached
    def enter(
        self,
        slots: Sequence[tuple[str, int]],
        member: str,
        seconds: float,
        windows: Sequence[tuple[RateLimitItem, str]],
    ) -> tuple[int, float] | None:
        """The worker's take, in one round trip (or none of its own: `Entry`
        rides the worker's look at the call): a slot of each (scope, cap) for
        `seconds` and a hit of each window; or none of them, and (index in
        slots then windows, when it frees one) of the first that was full.
        One script takes them all or none (ENTER, the library's acquire
        inside): a call that finds one full, and waits, consumes nothing."""
        entry = Entry(self, slots, member, seconds, windows)
        return entry.landed(self._pipelined(entry.ride))

    # Concurrency slots.
    @reached
    def take(
        self, slots: Sequence[tuple[str, int]], member: str, seconds: float
    ) -> tuple[int, float] | None:
        """Take a slot of each (scope, cap) for `seconds`, or none; (index,
        when one frees) of the first that is full."""
        if not slots:
            return None
        now = clock.now()
        keys = [slots_key(scope) for scope, _ in slots]
        args = [now, now + seconds, member, TTL_SECONDS, len(slots), *(cap for _, cap in slots)]
        index, when = self.enter_script(keys=keys, args=args)  # ENTER with no windows
        return None if int(index) == 0 else (int(index) - 1, float(when))

    @reached
    def free(self, slots: Sequence[tuple[str, int]]) -> list[int]:
        """Free slots of each (scope, cap) now."""
        if not slots:
            return []
        keys = [slots_key(scope) for scope, _ in slots]
        return [int(n) for n in self._free(keys=keys, args=[clock.now(), *(c for _, c in slots)])]

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
        it is now, taken in flight. One round trip (or none of its own:
        `Finish` rides the worker's publish of the call's end)."""
        if not scopes and share is None:
            return []
        finish = Finish(self, scopes, member, share)
        return finish.landed(self._pipelined(finish.ride))

    @reached
    def slots_used(self) -> dict[str, int]:
        """Slots held now by scope (`/metrics`)."""
        now = clock.now()
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

    # Batches waiting for a rate or a slot.
    @reached
    def unsend(self, batch_id: str, *call_ids: str) -> None:
        """Calls a worker sent back to wait, or the sender marked and then
        held or ended: unsent, so the batch sends them again."""
        self.client.hdel(sent_key(batch_id), *call_ids)

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


def _room(
    windows: Sequence[tuple[RateLimitItem, str]],
    slots: Sequence[tuple[str, int]],
    seen: list[Any],
    now: float,
) -> dict[str, tuple[int, float]]:
    """LOOK's answer read per scope: what each window and cap has left, and
    when a window next frees one (a cap's slot: 0, unknown)."""
    room = {}
    for index, (item, scope) in enumerate(windows):  # as `get_window_stats` reads them
        oldest, count = seen[2 * index], int(seen[2 * index + 1])
        start = float(oldest) if oldest not in (b"", "") else now
        room[scope] = (item.amount - count, start + item.get_expiry())
    free = seen[2 * len(windows) :]
    room |= {scope: (int(n), 0.0) for (scope, _), n in zip(slots, free, strict=True)}
    return room
