"""The SQLite ledger's turn to write: one writer at a time across processes,
the others asleep in the kernel until it is theirs.

SQLite's write lock cannot be waited on: a writer that finds it taken tries
again after a nap (`engine._begin_immediate`). When a reads worker's sixteen
pool processes end their calls at once, the waiters' naps and tries took CPU
from the one holding the lock, and it was taken up to 3 ms after it was let
go, so each end waited for the ends before it several times over. Here a
writer first takes an exclusive `flock` on a file beside the database's: the
kernel hands it on the moment the holder closes it, or the holder's process
dies. A wait longer than the budget fails as "database is locked", as SQLite's
own would (docs/architecture.md, "The ledger").

`flock` has no timeout, so a wait that does not end at once is made by the
process's waiting thread, started once and kept (a thread started for each
wait cost a pool process about 35 us of CPU, and most of a reads worker's
ends wait when sixteen calls end at once); if the budget runs out first,
that thread lets the turn go as soon as it gets it. Its waits are one at a
time: a second writer of the process waits behind the first, as it would
for the turn anyway. A forked child closes its copies of the turns its parent
had open (an inherited copy would keep the turn held after the parent let it
go), and starts its own waiting thread.
"""

from __future__ import annotations

import fcntl
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import exc

SUFFIX = "-turn"  # beside the database's own -wal and -shm files
_open: set[int] = set()  # this process's open turn files
_open_lock = threading.Lock()
_waiting = threading.local()  # when this thread began to wait for its turn, while it writes
_room: list[tuple[int, queue.SimpleQueue]] = []  # this process's waiting thread's queue
_room_lock = threading.Lock()


class WriteTurn:
    """The turn of one SQLite file's writers, waited for up to `seconds`."""

    def __init__(self, database: Path, seconds: float) -> None:
        self._path = str(database) + SUFFIX
        self._seconds = seconds

    @contextmanager
    def taken(self) -> Iterator[None]:
        _waiting.began = time.monotonic()  # one budget for the turn and SQLite's lock
        try:
            fd = _opened(self._path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not _Waiter(fd).waited(self._seconds):  # the waiter's thread owns fd now
                    raise _locked(self._seconds) from None
            except BaseException:
                _close(fd)
                raise
            try:
                yield
            finally:
                _close(fd)
        finally:
            _waiting.began = None


def left_of(seconds: float) -> float:
    """What a writer has left of its `seconds` to wait for SQLite's own lock
    (`engine._begin_immediate`) after the wait for its turn: both waits share
    one budget, so an attempt at a write never waits longer than it did
    before there were turns (a side effect's claim that waited twice as long
    was sent again by the sweep meanwhile)."""
    began = getattr(_waiting, "began", None)
    return seconds if began is None else max(0.0, seconds - (time.monotonic() - began))


class _Waiter:
    """One blocking wait for the turn, on the process's waiting thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._abandoned = False
        self._failed = False

    def waited(self, seconds: float) -> bool:
        _waiting_room().put(self)
        if self._done.wait(seconds) and not self._failed:
            return True
        with self._lock:
            if self._done.is_set() and not self._failed:
                return True
            self._abandoned = True  # taken later, it is let go at once
            return False

    def _wait(self) -> None:
        with self._lock:
            if self._abandoned:  # its writer gave up before this thread came to it
                _close(self._fd)
                self._done.set()
                return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError:
            self._failed = True
        with self._lock:
            if self._abandoned or self._failed:
                _close(self._fd)
            self._done.set()


def _waiting_room() -> queue.SimpleQueue:
    """The queue of this process's waiting thread, which is started on first use."""
    pid = os.getpid()
    with _room_lock:
        if not _room or _room[0][0] != pid:
            waits: queue.SimpleQueue = queue.SimpleQueue()
            threading.Thread(
                target=_serve, args=(waits,), name="toolrun-write-turn", daemon=True
            ).start()
            _room[:] = [(pid, waits)]
        return _room[0][1]


def _serve(waits: queue.SimpleQueue) -> None:
    while True:
        waiter = waits.get()
        try:
            waiter._wait()
        except BaseException:  # noqa: BLE001 - its writer fails at its budget; the next waits
            waiter._failed = True
            waiter._done.set()


def _opened(path: str) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    with _open_lock:
        _open.add(fd)
    return fd


def _close(fd: int) -> None:
    with _open_lock:
        if fd not in _open:
            return
        _open.discard(fd)
    os.close(fd)  # the turn goes with the last copy of the open file


def _locked(seconds: float) -> exc.OperationalError:
    """A wait past its budget, as SQLAlchemy reports SQLite's: a transient fault."""
    cause = sqlite3.OperationalError(f"database is locked (no write turn in {seconds:g} s)")
    return exc.OperationalError("BEGIN IMMEDIATE", None, cause)


def _in_child() -> None:
    global _open_lock, _room_lock
    _open_lock = threading.Lock()  # another thread of the parent may have held it
    _room_lock = threading.Lock()
    _room.clear()  # the parent's waiting thread is not this process's
    inherited = list(_open)
    _open.clear()
    for fd in inherited:
        try:
            os.close(fd)
        except OSError:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
