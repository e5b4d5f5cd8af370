"""The write hold: no ledger transaction of a process is open while a tool runs in it.

In a pool process the tool runs on the main thread, and C code it calls can
hold the GIL until the process is killed at its hard limit; a transaction
another thread of that process had open (the buffer's flusher replaying rows
after an outage) would keep the ledger locked for everyone until then. While
`quiet()` is held, other threads' ledger writes wait to begin, and `quiet()`
itself waits for writes under way to end; the thread holding it still writes.

A fork waits the same way (`pause` before it, `resume` after, in the parent):
a child forked while another thread of its parent holds SQLite's write lock
inherits SQLite's record that its process holds that lock, and can never write
(a worker's main process ends killed calls and sweeps while it forks
replacement pool processes).

A fork waits for reads under way too (`reading`), though nothing else does: a
read holds, for a moment at its start and end, SQLite's mutex over the
process's record of the file's log locks, and a child forked in that moment
inherited the mutex held and hung on its first connection to the file. A tool
running does not hold reads back; reads never waited for it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

_paused_at_fork: weakref.WeakSet[WriteHold] = weakref.WeakSet()


class WriteHold:
    def __init__(self, *, at_fork: bool = False) -> None:
        """`at_fork`: every fork of this process waits for this hold (SQLite)."""
        self._changed = threading.Condition()
        self._writers = 0
        self._quiet_by: int | None = None  # the thread running a tool
        self._writing: dict[int, int] = {}  # thread -> its writes under way
        self._reading: dict[int, int] = {}  # thread -> its reads under way (`at_fork` only)
        self._forks = 0
        if at_fork:
            _paused_at_fork.add(self)

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """While a tool runs on this thread (one at a time per process)."""
        with self._changed:
            while self._writers or self._quiet_by is not None:
                self._changed.wait()
            self._quiet_by = threading.get_ident()
        try:
            yield
        finally:
            with self._changed:
                self._quiet_by = None
                self._changed.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around one write transaction. A thread with a read or write of its
        own under way does not wait for a fork: the fork waits for that one,
        and each would wait for the other for ever."""
        me = threading.get_ident()
        with self._changed:
            while self._quiet_by not in (None, me) or (
                self._forks and me not in self._reading and me not in self._writing
            ):
                self._changed.wait()
            self._writers += 1
            self._writing[me] = self._writing.get(me, 0) + 1
        try:
            yield
        finally:
            with self._changed:
                self._writers -= 1
                self._writing[me] -= 1
                if not self._writing[me]:
                    del self._writing[me]
                self._changed.notify_all()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Around one read transaction, for a fork to wait for (`at_fork`
        only): it waits while a fork is paused, but not for a tool running. A
        read of a thread with a read or write of its own under way does not
        wait: the fork waits for that one anyway."""
        me = threading.get_ident()
        with self._changed:
            while self._forks and me not in self._reading and me not in self._writing:
                self._changed.wait()
            self._reading[me] = self._reading.get(me, 0) + 1
        try:
            yield
        finally:
            with self._changed:
                if self._reading[me] == 1:
                    del self._reading[me]
                else:
                    self._reading[me] -= 1
                if self._forks:  # only a fork waits for reads to end
                    self._changed.notify_all()

    def pause(self) -> None:
        """Before a fork: wait for other threads' reads and writes under way
        to end, and keep new ones from beginning until `resume`."""
        me = threading.get_ident()
        with self._changed:
            self._forks += 1
            while any(t != me for t in self._writing) or any(t != me for t in self._reading):
                self._changed.wait()

    def resume(self) -> None:
        """After a fork, in the parent."""
        with self._changed:
            self._forks -= 1
            self._changed.notify_all()


def _before_fork() -> None:
    global _paused
    _paused = list(_paused_at_fork)
    for hold in _paused:
        hold.pause()


def _after_fork() -> None:
    global _paused
    for hold in _paused:
        hold.resume()
    _paused = []


def _in_child() -> None:
    global _paused
    for hold in _paused:
        hold._forks -= 1  # the child's copy; nothing of it waits
        # and a lock of its own: another thread may have held the copied one
        hold._changed = threading.Condition()
    _paused = []


_paused: list[WriteHold] = []
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_in_child)
