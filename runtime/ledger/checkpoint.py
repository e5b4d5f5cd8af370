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
"""

from __future__ import annotations

import logging
import os
import threading

from sqlalchemy.engine import Engine

log = logging.getLogger("toolrun.ledger")
EVERY = 16  # a process's commits between two of its checkpoints


class Checkpoints:
    """The checkpointing thread of one SQLite ledger in this process."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._commits = 0
        self._pid: int | None = None  # the process whose thread runs, once started
        self._closed = False

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
        copied back), or None if the database could not be reached."""
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
