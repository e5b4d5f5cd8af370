"""SQLite's checkpoints, made by a thread rather than in a writer's commit
(docs/architecture.md, "The ledger").

In WAL mode SQLite copies its log back into the database file in whichever
commit finds the log at 1,000 pages: that writer copies them all before it
goes on, a worker before it publishes a result, a client before `submit`
returns. A P1 batch writes about fifty pages, so one batch in twenty paid
about 3 ms for it; those were P1's slowest (the hop from the end's commit
to the client took 3.5-5 ms instead of 0.8).

Here every `EVERY` commits a process's writers wake its checkpointing
thread, which runs a PASSIVE checkpoint on a pooled connection: it waits
for no writer and no writer waits for it (a checkpoint of another process
at the same time is skipped). SQLite's own checkpoint in the commit stays,
as the bound on the log's size, and finds little or nothing left to copy.
The thread is started on the first wake and sleeps until the next: an idle
process pays nothing. A forked child starts its own.

A fork waits for a checkpoint under way, as it waits for writes
(`write_hold.py`): SQLite keeps, for each file a process has open, its own
record of the log's locks its connections hold, under a mutex of its own, and
a child forked in the middle of a checkpoint inherited both as they were.
With the mutex held, the child's first connection to the file waited for it
forever (without the wait, a child of tests/ledger/checkpoint_fork.py hung in
two of its first eight runs); with only the checkpoint's lock recorded, every
checkpoint of the file in the child found that lock taken by a connection of
its own that no longer exists, and was skipped (`(1, -1, -1)`) for the life of
the process: a pool process a worker forked in that moment hung, or never
copied the log back.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref

from sqlalchemy.engine import Engine

log = logging.getLogger("toolrun.ledger")
EVERY = 16  # a process's commits between two of its checkpoints
_waited_at_fork: weakref.WeakSet[Checkpoints] = weakref.WeakSet()


class Checkpoints:
    """The checkpointing thread of one SQLite ledger in this process."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._running = threading.Lock()  # held through a checkpoint: a fork waits for it
        self._commits = 0
        self._pid: int | None = None  # the process whose thread runs, once started
        self._closed = False
        _waited_at_fork.add(self)

    def committed(self) -> None:
        """A write transaction of this process committed."""
        self._commits += 1  # a lost increment under a race only moves the next wake
        if self._commits % EVERY == 0:
            self._start()
            self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def run_once(self) -> tuple[int, int, int] | None:
        """One PASSIVE checkpoint: SQLite's (busy, frames in the log, frames
        copied back), or None if the database could not be reached. A fork
        waits for it, connection and all: a new pooled connection opens the
        file in SQLite, under the same locks of the process as the checkpoint."""
        with self._running:
            return self._checkpoint()

    def _checkpoint(self) -> tuple[int, int, int] | None:
        try:
            connection = self._engine.raw_connection()
        except Exception:  # noqa: BLE001 - the next wake tries again
            return None
        try:
            cursor = connection.cursor()
            try:
                cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
                return tuple(cursor.fetchone())
            finally:
                cursor.close()
        except Exception as error:  # noqa: BLE001 - the next wake tries again
            log.debug("a checkpoint of the ledger failed: %s", error)
            return None
        finally:
            connection.close()

    def _start(self) -> None:
        pid = os.getpid()
        if self._pid == pid:
            return
        with self._lock:
            if self._pid == pid or self._closed:
                return
            self._pid = pid
            self._wake = threading.Event()  # a forked child's: the parent's may be set
            threading.Thread(
                target=self._serve, args=(self._wake,), name="toolrun-checkpoint", daemon=True
            ).start()

    def _serve(self, wake: threading.Event) -> None:
        while True:
            wake.wait()
            wake.clear()
            if self._closed:
                return
            self.run_once()


def _before_fork() -> None:
    """Wait for checkpoints under way (PASSIVE: they wait for nobody), and
    keep new ones from beginning until the fork is made."""
    global _paused
    _paused = list(_waited_at_fork)
    for checkpoints in _paused:
        checkpoints._running.acquire()


def _after_fork() -> None:
    """In the parent."""
    global _paused
    for checkpoints in _paused:
        checkpoints._running.release()
    _paused = []


def _in_child() -> None:
    """The child's locks are new: another thread of the parent may have held
    `_lock` (starting its thread) when it forked, and would never let go here."""
    global _paused
    for checkpoints in list(_waited_at_fork):
        checkpoints._lock = threading.Lock()
        checkpoints._running = threading.Lock()
    _paused = []


_paused: list[Checkpoints] = []
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_in_child)
