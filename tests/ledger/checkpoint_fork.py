"""Forks a process whose ledger checkpoints on a thread, in a process of its
own: `python checkpoint_fork.py <database file> [forks]`. Run by
tests/ledger/test_checkpoint.py, never imported by pytest: a fork in a test
process copies the locks its other threads hold (xdist's among them).

Each fork comes on the commit that wakes the parent's checkpointing thread,
so it may find the thread at work; at the first, another thread of the
parent holds the lock a thread's start takes (`Checkpoints._lock`), as one
starting the thread would. Each child writes through the ledger it
inherited, and exits 0 once a checkpointing thread of its own runs and one
of its checkpoints copies the log back; a child that hangs is killed by its
alarm. The exit code is the first failing child's, else 0: 1 no thread of
its own, 2 its checkpoints never copied the log back, 3 an error, 142 hung
(killed by SIGALRM).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text

from runtime.ledger.checkpoint import EVERY
from runtime.ledger.database import Database
from tests.support.fork_scripts import fork_child, waited

CHILD_SECONDS = 20  # a child's deadline, and its alarm's a little later
BLOB = 16_000  # bytes a row: four pages, so a checkpoint has pages to copy


def insert(database: Database, rows: int = 1) -> None:
    for _ in range(rows):
        database.transaction(
            lambda c: c.execute(text("INSERT INTO t VALUES (randomblob(:n))"), {"n": BLOB}),
            core=True,
        )


def child(database: Database) -> int:
    signal.alarm(CHILD_SECONDS + 10)  # its default action ends a process stuck in C code
    database._engine.dispose(close=False)  # pooled connections must not cross a fork
    insert(database, EVERY * 2)  # its own commits wake a thread of its own
    deadline = time.monotonic() + CHILD_SECONDS
    while not any(t.name == "toolrun-checkpoint" for t in threading.enumerate()):
        if time.monotonic() > deadline:
            return 1
        time.sleep(0.01)
    while True:  # busy only while another process checkpoints, never for good
        found = database._checkpoints.run_once()
        if found is not None and found[0] == 0:
            return 0
        if time.monotonic() > deadline:
            return 2
        insert(database)
        time.sleep(0.01)


@contextmanager
def holding(lock: threading.Lock) -> Iterator[None]:
    """`lock` held by another thread meanwhile."""
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            done.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait()
    try:
        yield
    finally:
        done.set()
        thread.join()


def main(path: str, forks: int) -> int:
    database = Database(f"sqlite:///{path}")
    database.transaction(lambda c: c.execute(text("CREATE TABLE t (x BLOB)")), core=True)
    insert(database, EVERY)  # the parent's thread is started
    for index in range(forks):
        insert(database, EVERY)  # its last commit wakes the parent's thread: fork at once
        if index == 0:
            with holding(database._checkpoints._lock):
                pid = fork_child(lambda: child(database))
        else:
            pid = fork_child(lambda: child(database))
        if code := waited(pid, index):
            return code
    database.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5))
