"""While a tool runs, no other thread of its process begins a ledger write,
and a tool does not start while another thread's write is under way; on
SQLite a fork waits for the reads and writes of other threads under way."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from sqlalchemy import text

from runtime.ledger import write_hold
from runtime.ledger.store import Ledger
from runtime.ledger.write_hold import WriteHold
from tests.support.fork_scripts import run_fork_script


def test_a_write_waits_for_the_tool_and_the_tool_for_a_write():
    hold, order = WriteHold(), []
    writing, tool_may_end = threading.Event(), threading.Event()

    def writer() -> None:
        with hold.writing():
            order.append("write")

    with hold.quiet():
        order.append("tool starts")
        with hold.writing():  # the tool's own thread still writes (a retry's row)
            order.append("own write")
        thread = threading.Thread(target=writer)
        thread.start()
        thread.join(timeout=0.2)
        assert thread.is_alive()  # held back while the tool runs
        order.append("tool ends")
    thread.join(timeout=5)
    assert order == ["tool starts", "own write", "tool ends", "write"]

    def long_write() -> None:
        with hold.writing():
            writing.set()
            tool_may_end.wait(5)
            order.append("long write ends")

    thread = threading.Thread(target=long_write)
    thread.start()
    writing.wait(5)
    threading.Timer(0.2, tool_may_end.set).start()
    with hold.quiet():  # waits for the write under way
        order.append("next tool starts")
    thread.join(timeout=5)
    assert order[-2:] == ["long write ends", "next tool starts"]


def test_a_process_forked_while_a_thread_writes_can_still_write(tmp_path):
    """A SQLite ledger's writes and its process's forks wait for each other: a
    child forked mid-write would inherit SQLite's record that it holds the
    write lock, and never write (a worker's main process forks its pool
    processes while it ends killed calls and sweeps)."""
    path = tmp_path / "ledger.db"
    ledger = Ledger(f"sqlite:///{path}")
    writing, order = threading.Event(), []

    def hold_the_lock(session) -> None:
        session.execute(text("CREATE TABLE IF NOT EXISTS probe (x INTEGER)"))
        session.execute(text("INSERT INTO probe VALUES (1)"))
        writing.set()
        time.sleep(0.3)  # the fork below is asked for while this write is under way
        order.append("write ends")

    thread = threading.Thread(target=ledger._run, args=(hold_the_lock,))
    thread.start()
    assert writing.wait(10)
    pid = os.fork()
    if pid == 0:
        try:
            connection = sqlite3.connect(path, timeout=3, isolation_level=None)
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO probe VALUES (2)")
            connection.execute("COMMIT")
        except sqlite3.Error:
            os._exit(1)
        os._exit(0)
    order.append("forked")
    _, status = os.waitpid(pid, 0)
    thread.join(timeout=10)
    assert os.waitstatus_to_exitcode(status) == 0, "the child could not write"
    assert order == ["write ends", "forked"]
    ledger.close()


def test_a_fork_waits_for_a_read_under_way_and_holds_new_ones_back(tmp_path):
    """A SQLite ledger's reads and its process's forks wait for each other: a
    child forked while another thread of its parent began or ended a read
    inherited SQLite's mutex over the file's log locks held, and hung on its
    first connection to the file."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    hold = ledger._hold
    assert hold in write_hold._paused_at_fork  # SQLite: every fork pauses it
    reading, read_may_end, paused, order = *(threading.Event() for _ in range(3)), []

    def long_read(connection) -> None:
        connection.execute(text("SELECT 1"))
        reading.set()
        read_may_end.wait(5)
        order.append("read ends")

    def fork() -> None:
        hold.pause()  # as `_before_fork` does
        order.append("paused")
        paused.set()
        read_may_end.wait(5)  # the fork, then
        hold.resume()

    def read() -> None:
        ledger._run(lambda c: c.execute(text("SELECT 1")), write=False, core=True)
        order.append("next read")

    reader = threading.Thread(
        target=ledger._run, args=(long_read,), kwargs={"write": False, "core": True}
    )
    reader.start()
    assert reading.wait(10)
    forker = threading.Thread(target=fork)
    forker.start()
    forker.join(timeout=0.2)
    assert not paused.is_set()  # waits for the read under way
    read_may_end.set()
    reader.join(timeout=10)
    assert paused.wait(10)
    forker.join(timeout=10)
    assert order[:2] == ["read ends", "paused"]

    read_may_end.clear()
    forker = threading.Thread(target=fork)
    forker.start()
    assert paused.wait(10)
    follower = threading.Thread(target=read)
    follower.start()
    follower.join(timeout=0.2)
    order.append("resumed")
    read_may_end.set()  # a new read waits for the fork
    follower.join(timeout=10)
    forker.join(timeout=10)
    assert order[2:] == ["paused", "resumed", "next read"]
    ledger.close()


def test_a_read_does_not_wait_for_the_tool_nor_the_tool_for_a_read():
    """Reads never waited for a tool running; the fork's wait did not change that."""
    hold, order = WriteHold(at_fork=True), []
    reading, tool_ran = threading.Event(), threading.Event()

    def reader() -> None:
        with hold.reading():
            order.append("read")

    with hold.quiet():
        thread = threading.Thread(target=reader)
        thread.start()
        thread.join(timeout=10)
        order.append("tool ends")
    assert order == ["read", "tool ends"]

    def long_read() -> None:
        with hold.reading():
            reading.set()
            tool_ran.wait(10)
            order.append("long read ends")

    thread = threading.Thread(target=long_read)
    thread.start()
    assert reading.wait(10)
    with hold.quiet():  # a read under way does not keep the tool waiting
        order.append("tool runs")
    tool_ran.set()
    thread.join(timeout=10)
    assert order[2:] == ["tool runs", "long read ends"]


def test_processes_forked_while_threads_read_open_the_ledger(tmp_path):
    """Pool processes forked while other threads of their parent loop ledger
    reads each open the ledger, read and write it, and exit: the forks waited
    for the reads under way (without the wait, one child in about fifty hung
    on its first connection). The forks are made in a process of their own
    (`read_fork.py`, whose exit code says which child failed and how): a child
    that hangs is killed by its alarm, never holds pytest past its timeout,
    and copies none of this process's other threads' locks."""
    script = Path(__file__).with_name("read_fork.py")
    done = run_fork_script(script, tmp_path / "ledger.db", 200)
    assert done.returncode == 0, done.stderr


def test_a_thread_that_reads_may_write_while_a_fork_waits_for_its_read():
    """A fork waits for the thread's read to end; the read's thread, starting a
    write meanwhile, must not wait for the fork in turn: each would wait for
    the other for ever."""
    hold, order = WriteHold(at_fork=True), []
    reading, paused = threading.Event(), threading.Event()

    def fork() -> None:
        hold.pause()  # as `_before_fork` does
        order.append("paused")
        paused.set()
        hold.resume()

    def read_then_write() -> None:
        with hold.reading():
            reading.set()
            forker.start()
            forker.join(timeout=0.2)  # the fork waits for this read
            with hold.writing():
                order.append("write inside the read")
            order.append("read ends")

    forker = threading.Thread(target=fork, daemon=True)
    reader = threading.Thread(target=read_then_write, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "the write waited for the fork, which waited for its read"
    assert paused.wait(10)
    assert order == ["write inside the read", "read ends", "paused"]
