"""The throttle's commands that ride another pipeline (docs/architecture.md,
"Flow control"): the worker's take rides its look at the call, its finish
the publish of the call's end. `ride` puts the command at the pipeline's
end, `landed` reads its answer (or, if Redis had lost the scripts, runs the
command again on its own)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from limits import RateLimitItem
from limits.strategies import MovingWindowRateLimiter
from redis.client import Pipeline
from redis.commands.core import Script

from runtime import clock
from runtime.flow.fair_share import IN_FLIGHT_SECONDS, _share_keys
from runtime.keyspace.names import TTL_SECONDS, slots_key

Slots = Sequence[tuple[str, int]]  # (scope, cap) of each concurrency cap
Windows = Sequence[tuple[RateLimitItem, str]]  # (rate, scope) of each window
Full = tuple[int, float] | None  # None: taken; else (index, when it frees) of the first full


class Scripts(Protocol):
    """What a riding command needs of the `Throttle` that made it
    (`throttle.py`): its scripts, loaded, and itself to run alone when
    Redis had lost them."""

    enter_script: Script
    finish_script: Script
    rates: MovingWindowRateLimiter

    def load(self) -> None: ...

    def lost(self, answers: list[Any]) -> bool: ...

    def window_key(self, item: RateLimitItem, scope: str) -> str: ...

    def enter(self, slots: Slots, member: str, seconds: float, windows: Windows) -> Full: ...

    def finish(
        self, scopes: Sequence[str], member: str, share: tuple[str, int] | None
    ) -> list[str]: ...


@dataclass(frozen=True)
class Finish:
    """`Throttle.finish` as a command that rides another pipeline: `ride`
    puts it at its end, `landed` reads its answer."""

    throttle: Scripts  # the `Throttle` that made it
    scopes: Sequence[str]
    member: str
    share: tuple[str, int] | None

    def ride(self, pipe: Pipeline) -> None:
        self.throttle.load()  # a script rides as EVALSHA: it must be in Redis's cache
        keys, args = [slots_key(scope) for scope in self.scopes], [self.member, len(self.scopes)]
        if self.share is not None:
            now = clock.now()
            keys += _share_keys(self.share[0])
            args += [now, now + IN_FLIGHT_SECONDS, self.share[1]]
        pipe.evalsha(self.throttle.finish_script.sha, len(keys), *keys, *args)

    def landed(self, answers: list[Any]) -> list[str]:
        """The parked reads whose turn it is now. If Redis had lost the
        scripts (a restart), the finish again, on its own."""
        if self.throttle.lost(answers):
            return self.throttle.finish(self.scopes, self.member, self.share)
        return [m.decode() if isinstance(m, bytes) else m for m in answers[-1]]


@dataclass(frozen=True)
class Entry:
    """`Throttle.enter` as a command that rides another pipeline: `ride`
    puts it at its end, `landed` reads its answer."""

    throttle: Scripts  # the `Throttle` that made it
    slots: Sequence[tuple[str, int]]
    member: str
    seconds: float
    windows: Sequence[tuple[RateLimitItem, str]]

    def ride(self, pipe: Pipeline) -> None:
        throttle = self.throttle
        throttle.load()  # a script rides as EVALSHA: it must be in Redis's cache
        now = clock.now()
        keys = [slots_key(scope) for scope, _ in self.slots]
        keys += [throttle.window_key(item, scope) for item, scope in self.windows]
        args = [now, now + self.seconds, self.member, TTL_SECONDS, len(self.slots)]
        args += [cap for _, cap in self.slots]
        for item, _ in self.windows:
            args += [item.amount, item.get_expiry()]
        pipe.evalsha(throttle.enter_script.sha, len(keys), *keys, *args)

    def landed(self, answers: list[Any]) -> tuple[int, float] | None:
        """None: taken; else (index, when it frees one) of the first full."""
        throttle = self.throttle
        if throttle.lost(answers):  # Redis lost the scripts (a restart): none of them ran
            return throttle.enter(self.slots, self.member, self.seconds, self.windows)
        full, frees = answers[-1]
        index = int(full) - 1  # ENTER's answer: 0 taken, else the full one's index + 1
        if index < 0:
            return None
        if index < len(self.slots):
            return index, float(frees)
        item, scope = self.windows[index - len(self.slots)]
        return index, throttle.rates.get_window_stats(item, scope).reset_time
