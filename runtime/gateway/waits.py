"""Event streams and long polls each key holds open, capped by the policy's
`limits.size.waits_per_key` across every gateway process of the cluster
(docs/architecture.md, "Flow control"): past it, a `429` that says so. Each
stream and poll holds a task of its process until it ends, so one key must
not take them all, nor take the cap once in each of several gateways.

A wait is a slot of the scope `waits:<key id>` in Redis (`Throttle.take`), a
lease this process renews while the wait lasts: a gateway killed while it
holds waits leaves them to lapse. With Redis away, or on the in-process
transport, the count is this process's own (a warning says so)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runtime.errors import StateUnavailable
from runtime.flow.throttle import Throttle
from runtime.gateway.keys import Key
from runtime.gateway.problems import Problem

log = logging.getLogger("toolrun.gateway")
LEASE_SECONDS = 30.0  # a wait's slot lapses this long after its gateway last renewed it


class Waits:
    def __init__(
        self, cap: int | None, throttle: Throttle | None = None, *, lease: float = LEASE_SECONDS
    ) -> None:
        """`throttle`: the cluster's Redis, where the waits of every gateway
        are counted; None counts this process's alone."""
        self.cap, self.throttle, self.lease = cap, throttle, lease
        self._held: defaultdict[str, set[str]] = defaultdict(set)  # key id -> members
        self._lock = threading.Lock()
        self._renewing: threading.Thread | None = None
        self._stop = threading.Event()

    def take(self, key: Key) -> Callable[[], None]:
        """Hold one wait for `key`, or `Problem(429)`; the release to call
        when it ends (calling it again does nothing)."""
        member = f"{uuid.uuid4().hex}"
        with self._lock:
            if not self._take_shared(key, member) and len(self._held[key.id]) >= self.cap:
                raise self._full(key)
            self._held[key.id].add(member)
            self._renew_in_background()
        done = threading.Event()

        def release() -> None:
            if done.is_set():
                return
            done.set()
            with self._lock:
                self._held[key.id].discard(member)
                if not self._held[key.id]:
                    del self._held[key.id]
            self._release_shared(key.id, member)

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
        """The waits this process holds for `key_id`."""
        with self._lock:
            return len(self._held.get(key_id, ()))

    def close(self) -> None:
        self._stop.set()

    def _take_shared(self, key: Key, member: str) -> bool:
        """True if the cluster's count decided (a slot taken, or no cap);
        raises the 429 if it is full; False to count in this process."""
        if self.cap is None:
            return True
        if self.throttle is None:
            return False
        try:
            full = self.throttle.take([(_scope(key.id), self.cap)], member, self.lease)
        except StateUnavailable as error:
            log.warning("waits of %s counted in this process only: %s", key.name, error)
            return False
        if full is not None:
            raise self._full(key)
        return True

    def _release_shared(self, key_id: str, member: str) -> None:
        if self.cap is None or self.throttle is None:
            return
        try:
            self.throttle.release([_scope(key_id)], member)
        except StateUnavailable:  # it lapses
            pass

    def _full(self, key: Key) -> Problem:
        return Problem(
            429,
            "too many waits",
            f"key {key.name} holds {self.cap} event streams and long polls open, as "
            "many as the policy allows (limits.size.waits_per_key); close one, or "
            "read without waiting",
        )

    def _renew_in_background(self) -> None:
        """Under the lock: a thread that renews the slots held while any are."""
        if self.cap is None or self.throttle is None or self._renewing is not None:
            return
        self._renewing = threading.Thread(target=self._renew, name="toolrun-waits", daemon=True)
        self._renewing.start()

    def _renew(self) -> None:
        """Every third of a lease, take each held slot again (a member that
        holds one only has its expiry moved on: `flow/throttle_scripts.py`'s `ENTER`)."""
        while not self._stop.wait(self.lease / 3):
            with self._lock:
                held = [(k, m) for k, members in self._held.items() for m in members]
            for key_id, member in held:
                try:
                    self.throttle.take([(_scope(key_id), self.cap)], member, self.lease)
                except StateUnavailable as error:
                    log.warning("waits of %s not renewed: %s", key_id, error)
                    break


def _scope(key_id: str) -> str:
    return f"waits:{key_id}"
