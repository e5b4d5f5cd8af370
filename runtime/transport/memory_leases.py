"""The in-process transport's leases (`runtime/transport/memory.py`): a thread of
this process cannot be lost on its own, so a call's hold lasts until it is
released, and the sweep's lease until its holder gives it up
(docs/architecture.md, "Leases" and "The batch's rules on a transport")."""

from __future__ import annotations

import math
import threading
import time

from runtime.types import ToolResult


class MemoryLeases:
    def __init__(self) -> None:
        self._leasing = threading.Lock()
        self._held: set[tuple[str, str]] = set()
        self._sweeper: str | None = None
        self._unheld: dict[tuple[str, str], float] = {}  # first seen with no hold (monotonic)

    def hold_sweep(self, holder: str, seconds: float) -> bool:
        with self._leasing:
            self._sweeper = self._sweeper or holder
            return self._sweeper == holder

    def release_sweep(self, holder: str) -> None:
        with self._leasing:
            if self._sweeper == holder:
                self._sweeper = None

    def lost(self, holder: str) -> bool:
        return False

    def hold(self, batch_id: str, call_id: str, seconds: float) -> ToolResult | None:
        with self._leasing:
            self._held.add((batch_id, call_id))
        return self.recall(batch_id, call_id)  # the transport's (`MemoryTransport`)

    def renew(self, calls: list[tuple[str, str]], seconds: float) -> None:
        with self._leasing:
            self._held.update(calls)

    def release(self, batch_id: str, call_id: str) -> None:
        with self._leasing:
            self._held.discard((batch_id, call_id))
            self._unheld.pop((batch_id, call_id), None)

    def left(self, batch_id: str, call_id: str, seconds: float) -> float:
        """A hold lasts until it is released: a thread is never judged lost."""
        return math.inf

    def holds(self, batch_id: str, call_ids: list[str]) -> dict[str, float]:
        with self._leasing:
            return {c: math.inf for c in call_ids if (batch_id, c) in self._held}

    def lapsed(self) -> set[tuple[str, str]]:
        return set()

    def unheld(self, batch_id: str, call_ids: list[str]) -> dict[str, float]:
        """One process, one clock: its monotonic one."""
        now = time.monotonic()
        with self._leasing:
            return {c: now - self._unheld.setdefault((batch_id, c), now) for c in call_ids}
