"""While a tool runs, no other thread of its process begins a ledger write,
and a tool does not start while another thread's write is under way."""

from __future__ import annotations

import os
import sqlite3
import threading
import time

from sqlalchemy import text

from runtime.ledger.store import Ledger
from runtime.ledger.write_hold import WriteHold


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
