"""Every open batch of one `Runtime`, followed on a fixed number of threads
(docs/architecture.md, "Following batches").

A batch costs no thread here: the transport's listener wakes the batch when
something arrives for it (`inbox.on_arrival`), and a few driver threads look
at woken batches, and at each batch now and then on a timer (its deadline,
results Redis may have lost). The now-and-then looks are spread so that all
the batches together cost about `LOOKS_PER_SECOND`, however many there are;
a batch's deadline is a timer of its own, never late by the spreading.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from runtime.client.run import BatchRun

log = logging.getLogger("toolrun.batch")
DRIVERS = 2  # threads that look at batches: one slow ledger call does not hold up the rest
CHECK_SECONDS = 1.0  # the shortest time between two thorough looks at one batch
LOOKS_PER_SECOND = 100  # thorough looks of all batches together, once there are many
POLL_SECONDS = 0.01  # how often an inbox that cannot wake its batch is looked at


@dataclass(eq=False)
class _Followed:
    run: BatchRun | None  # None once ended: its timers outlive it, and must not keep it
    pushes: bool  # its inbox wakes it on an arrival; else it is polled
    check_at: float = 0.0  # monotonic: its next thorough look
    poll_at: float = 0.0  # monotonic: its next poll, if it is polled
    queued: bool = False  # in the ready queue
    busy: bool = False  # a driver is looking at it
    again: bool = False  # woken while busy: look once more


class Follower:
    def __init__(self, *, drivers: int = DRIVERS) -> None:
        self._drivers = drivers
        self._changed = threading.Condition()
        self._followed: dict[BatchRun, _Followed] = {}
        self._ready: deque[_Followed] = deque()
        self._timers: list[tuple[float, int, _Followed]] = []  # a heap; stale entries skipped
        self._order = itertools.count()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def follow(self, run: BatchRun) -> None:
        """Look at `run` until every call of it has ended (a first look at once)."""
        inbox = run.inbox
        entry = _Followed(run, pushes=inbox is not None)
        if inbox is not None:
            inbox.on_arrival(lambda: self._wake(entry))
        with self._changed:
            if self._closed:
                return
            self._followed[run] = entry
            now = time.monotonic()
            self._schedule(entry, now)
            if not entry.pushes:
                self._poll(entry, now)
            self._start()
            here = inbox is not None and inbox.quick
            if not here:
                self._enqueue(entry)
            entry.busy = here
        if here:  # what arrived before it was followed, read on this thread: no driver woken
            self._look(entry, thorough=False)

    def open_runs(self) -> list[BatchRun]:
        with self._changed:
            return list(self._followed)

    def cancel_all(self, *, by: str, seconds: float) -> None:
        """Cancel every open batch followed, then wait up to `seconds` in all
        for them to end (`Runtime.close`)."""
        open_runs = [run for run in self.open_runs() if not run.done]
        for run in open_runs:
            try:
                run.cancel(by=by)
            except Exception as error:  # noqa: BLE001 - the sweep ends it at its deadline
                log.warning("batch %s: could not cancel it: %s", run.batch.id, error)
        limit = time.monotonic() + seconds
        for run in open_runs:
            run.events.wait_done(max(0.0, limit - time.monotonic()))

    def close(self) -> None:
        """Stop following; the batches go on in the cluster."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            # The runs, not their entries: a look under way on the listener's
            # thread may end its batch meanwhile, and its entry lets its run go.
            followed, self._followed = list(self._followed), {}
        for thread in self._threads:
            thread.join(timeout=5)
        for run in followed:
            run.unwatch()

    def _wake(self, entry: _Followed) -> None:
        """An arrival, on the listener's thread: a batch no driver is looking
        at, whose inbox holds what arrived in memory (`quick`: no round trip
        to read it), is looked at here at once, which spares the result a hop
        to a driver thread and the wait for it to run; any other goes to a
        driver (one under a driver's look is looked at again once it ends)."""
        with self._changed:
            if (
                self._closed
                or entry.run not in self._followed
                or entry.busy
                or entry.queued
                or entry.run.inbox is None
                or not entry.run.inbox.quick
            ):
                self._enqueue(entry)
                return
            entry.busy = True
        self._look(entry, thorough=False)

    def _enqueue(self, entry: _Followed) -> None:
        """Have a driver look at `entry`: soon, or again once the look under
        way ends (so that no arrival and no timer is lost). Call with the lock held."""
        if entry.run not in self._followed:
            return
        if entry.busy:
            entry.again = True
        elif not entry.queued:
            entry.queued = True
            self._ready.append(entry)
            self._changed.notify()

    def _schedule(self, entry: _Followed, now: float) -> None:
        """The next thorough look: spread over all batches, and at the deadline
        if that comes first; call with the lock held."""
        spread = max(CHECK_SECONDS, len(self._followed) / LOOKS_PER_SECOND)
        to_deadline = entry.run.seconds_to_deadline()
        wait = spread if to_deadline is None or to_deadline <= 0 else min(spread, to_deadline)
        entry.check_at = now + wait
        self._timer(entry, entry.check_at)

    def _poll(self, entry: _Followed, now: float) -> None:
        """The next look at an inbox that cannot wake its batch; call with the lock held."""
        entry.poll_at = now + POLL_SECONDS
        self._timer(entry, entry.poll_at)

    def _timer(self, entry: _Followed, due: float) -> None:
        """Drivers sleep until the first timer: woken only if this one comes first."""
        heapq.heappush(self._timers, (due, next(self._order), entry))
        if self._timers[0][2] is entry and self._timers[0][0] == due:
            self._changed.notify()

    def _start(self) -> None:
        """Start the drivers on the first batch; call with the lock held."""
        self._threads = [t for t in self._threads if t.is_alive()]
        for index in range(len(self._threads), self._drivers):
            thread = threading.Thread(
                target=self._drive, name=f"toolrun-follower-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _next(self) -> tuple[_Followed, bool] | None:
        """The next batch to look at and whether the look is thorough; None
        once closed. Call with the lock held."""
        while not self._closed:
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now:
                due, _, entry = heapq.heappop(self._timers)
                if entry.run not in self._followed:
                    continue
                if due in (entry.check_at, entry.poll_at):  # else a timer replaced since
                    self._enqueue(entry)
            while self._ready:
                entry = self._ready.popleft()
                entry.queued = False
                if entry.run in self._followed and not entry.busy:
                    entry.busy = True
                    return entry, now >= entry.check_at
            self._changed.wait(self._timers[0][0] - now if self._timers else None)
        return None

    def _drive(self) -> None:
        while True:
            with self._changed:
                found = self._next()
            if found is None:
                return
            self._look(*found)

    def _look(self, entry: _Followed, thorough: bool) -> None:
        try:
            entry.run.look(thorough=thorough)
            failed = False
        except Exception as error:  # noqa: BLE001 - the batch goes on without this process
            log.warning("batch %s: stopped following its results: %s", entry.run.batch.id, error)
            failed = True
        self._after(entry, thorough, failed)

    def _after(self, entry: _Followed, thorough: bool, failed: bool) -> None:
        with self._changed:
            entry.busy = False
            run = entry.run
            if failed or run.done:
                self._followed.pop(run, None)
                entry.run = None  # free at once: no timer, no cycle through its inbox
                ended = True
            else:
                ended = False
                now = time.monotonic()
                if thorough:
                    self._schedule(entry, now)
                if not entry.pushes:
                    self._poll(entry, now)
                if entry.again:
                    entry.again = False
                    self._enqueue(entry)
        if ended:
            run.unwatch()
