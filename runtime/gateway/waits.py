"""Event streams and long polls each key holds open in this gateway process,
capped by the policy's `limits.size.waits_per_key` (docs/architecture.md,
"Flow control"): past it, a `429` that says so. Each stream and poll holds a
task of this process until it ends, so one key must not take them all."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runtime.gateway.keys import Key
from runtime.gateway.problems import Problem


class Waits:
    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self._held: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self, key: Key) -> Callable[[], None]:
        """Hold one wait for `key`, or `Problem(429)`; the release to call
        when it ends (calling it again does nothing)."""
        with self._lock:
            if self.cap is not None and self._held[key.id] >= self.cap:
                raise Problem(
                    429,
                    "too many waits",
                    f"key {key.name} holds {self.cap} event streams and long polls open, as "
                    "many as the policy allows (limits.size.waits_per_key); close one, or "
                    "read without waiting",
                )
            self._held[key.id] += 1
        done = threading.Event()

        def release() -> None:
            if done.is_set():
                return
            done.set()
            with self._lock:
                self._held[key.id] -= 1
                if self._held[key.id] <= 0:
                    del self._held[key.id]

        return release

    @contextmanager
    def holding(self, key: Key, wait: float) -> Iterator[None]:
        """A long poll's hold (none when it does not wait)."""
        release = self.take(key) if wait > 0 else (lambda: None)
        try:
            yield
        finally:
            release()

    def held(self, key_id: str) -> int:
        with self._lock:
            return self._held[key_id]
