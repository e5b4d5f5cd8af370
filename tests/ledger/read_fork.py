"""Forks a process whose threads read its SQLite ledger without pause, in a
process of its own: `python read_fork.py <database file> [forks]`. Run by
tests/ledger/test_write_hold.py, never imported by pytest: a fork in a test
process copies the locks its other threads hold (xdist's among them).

Each fork is asked for while `READERS` threads loop ledger reads, so without
the fork's wait for reads (`WriteHold.reading`) some fork comes while a
reader holds SQLite's mutex over the process's record of the file's log
locks. Each child, as a worker's pool process does, builds a ledger of its
own on the file and reads and writes it, and exits 0; a child that hangs on
the mutex it inherited is killed by its alarm. The exit code is the first
failing child's, else 0: 1 its reads found nothing, 3 an error, 142 hung
(killed by SIGALRM).
"""

from __future__ import annotations

import signal
import sys
import threading

from sqlalchemy import text

from runtime.ledger.database import Database
from tests.support.fork_scripts import fork_child, waited

CHILD_SECONDS = 10  # a child's alarm: its ledger takes milliseconds
READERS = 3
AT_ONCE = 4  # children forked before the first of them is waited for


def count(database: Database) -> int:
    return database.transaction(
        lambda c: c.execute(text("SELECT count(*) FROM t")).scalar_one(), write=False, core=True
    )


def child(path: str) -> int:
    signal.alarm(CHILD_SECONDS)  # its default action ends a process stuck in C code
    database = Database(f"sqlite:///{path}")  # its own, as a pool process builds
    if count(database) < 1:
        return 1
    database.transaction(lambda c: c.execute(text("INSERT INTO t VALUES (2)")), core=True)
    database.close()
    return 0


def main(path: str, forks: int) -> int:
    database = Database(f"sqlite:///{path}")
    database.transaction(lambda c: c.execute(text("CREATE TABLE t (x INTEGER)")), core=True)
    database.transaction(lambda c: c.execute(text("INSERT INTO t VALUES (1)")), core=True)
    stop, reads = threading.Event(), [0] * READERS

    def read(index: int) -> None:
        while not stop.is_set():
            count(database)
            reads[index] += 1

    readers = [threading.Thread(target=read, args=(i,)) for i in range(READERS)]
    for thread in readers:
        thread.start()
    failed = 0
    try:
        for first in range(0, forks, AT_ONCE):
            children = {}
            for number in range(first, min(first + AT_ONCE, forks)):
                seen = sum(reads)
                while sum(reads) < seen + READERS:  # the readers are at it
                    stop.wait(0.001)
                children[fork_child(lambda: child(path))] = number
            for pid, number in children.items():
                code = waited(pid, number)
                failed = failed or code
            if failed:
                break
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    database.close()
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200))
