"""The SQLite ledger's turn to write (`ledger/write_turn.py`): writers take
turns across processes, one waiting asleep until the turn is let go, failing
as locked past its budget; a fork or a writer that gave up keeps no turn."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import exc

from runtime.ledger.engine import transient
from runtime.ledger.write_turn import SUFFIX, WriteTurn, left_of
from tests.support.waiting import wait_for

HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def path(tmp_path):
    return tmp_path / "ledger.db"


def _holder(path) -> subprocess.Popen:
    """Another process holding the turn until it is told to let go."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path) + SUFFIX],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def _free(path, within: float = 30.0) -> bool:
    """Whether the turn can be taken at once, tried until `within` passes."""
    fd = os.open(str(path) + SUFFIX, os.O_RDWR | os.O_CREAT)
    try:
        deadline = time.monotonic() + within
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)
    finally:
        os.close(fd)


def test_a_writer_waits_for_another_process_turn_and_takes_it_once_let_go(path):
    holder = _holder(path)
    let_go, took = threading.Event(), []

    def write() -> None:
        with WriteTurn(path, 30).taken():
            took.append(let_go.is_set())

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(0.3)  # it waits, however busy the machine
    assert thread.is_alive() and took == []
    let_go.set()
    holder.communicate("go\n", timeout=30)
    thread.join(30)
    assert took == [True]


def test_a_writer_past_its_budget_fails_as_locked_and_its_waiter_lets_the_turn_go(path):
    holder = _holder(path)
    try:
        with pytest.raises(exc.OperationalError, match="database is locked") as error:
            with WriteTurn(path, 0.2).taken():
                pass
        assert transient(error.value)
    finally:
        holder.communicate("go\n", timeout=30)
    # The thread that waited on gets the turn now, and lets it go at once.
    assert _free(path)


def test_writers_of_one_process_take_turns_too(path):
    turn, inside, most = WriteTurn(path, 30), [], []

    def write() -> None:
        for _ in range(20):
            with turn.taken():
                inside.append(1)
                most.append(len(inside))
                time.sleep(0.001)
                inside.pop()

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(most) == 80 and max(most) == 1


def test_a_child_forked_during_a_turn_does_not_keep_it(path):
    turn, (hold, go) = WriteTurn(path, 30), os.pipe()
    with turn.taken():
        child = os.fork()
        if child == 0:  # holds its copy of the parent's open turn until told to go
            os.close(go)
            os.read(hold, 1)
            os._exit(0)
    os.close(hold)
    try:
        assert _free(path, within=1.0)  # let go with the parent's copy, the child alive
        assert os.waitpid(child, os.WNOHANG) == (0, 0)
    finally:
        os.close(go)
        os.waitpid(child, 0)


def test_the_wait_for_the_turn_comes_off_the_wait_for_sqlites_lock(path):
    """One budget for both waits: a writer that waited for its turn has that
    much less to wait for SQLite's own lock (`engine._begin_immediate`)."""
    holder, left = _holder(path), []

    def write() -> None:
        with WriteTurn(path, 30).taken():
            left.append(left_of(30))

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(0.3)  # it waits at least this long, however busy the machine
    holder.communicate("go\n", timeout=30)
    thread.join(30)
    assert len(left) == 1 and left[0] <= 29.7
    assert left_of(30) == 30  # a write without a turn keeps its whole budget


def test_a_process_waits_for_its_turns_on_one_thread_kept(path):
    """The thread that waits for a turn is started once per process, not per wait."""
    seen = []
    for _ in range(2):
        holder = _holder(path)
        writer = threading.Thread(target=_write_once, args=(path,))
        writer.start()
        seen.append(
            wait_for(
                lambda: [t for t in threading.enumerate() if t.name == "toolrun-write-turn"],
                what="a thread waiting for the turn",
            )
        )
        holder.communicate("go\n", timeout=30)
        writer.join(30)
    assert len(seen[0]) == 1 and seen[0] == seen[1]


def _write_once(path) -> None:
    with WriteTurn(path, 30).taken():
        pass
