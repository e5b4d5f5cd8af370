"""SQLite's checkpoints made by a thread of the writing process
(runtime/ledger/checkpoint.py), not in a writer's commit."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

from sqlalchemy import text

from runtime.ledger.checkpoint import EVERY
from runtime.ledger.database import Database
from tests.support.fork_scripts import run_fork_script


def copied_back(path, tmp_path) -> int:
    """The rows the database file holds without its log: what a checkpoint copied back."""
    alone = tmp_path / "alone.db"
    shutil.copyfile(path, alone)
    with sqlite3.connect(alone) as connection:
        try:
            return connection.execute("SELECT count(*) FROM t").fetchone()[0]
        except sqlite3.OperationalError:  # the table itself is still only in the log
            return 0


def test_the_process_thread_copies_the_log_back_long_before_sqlite_would(tmp_path):
    """SQLite copies its log back in the commit that finds it at 1,000 pages;
    a few dozen one-page commits never get there, and the thread copies them."""
    path = tmp_path / "ledger.db"
    database = Database(f"sqlite:///{path}")
    try:
        database.transaction(lambda c: c.execute(text("CREATE TABLE t (x INTEGER)")), core=True)
        for index in range(EVERY * 4):
            database.transaction(
                lambda c, index=index: c.execute(text("INSERT INTO t VALUES (:x)"), {"x": index}),
                core=True,
            )
        deadline = time.monotonic() + 30
        while copied_back(path, tmp_path) < EVERY * 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert copied_back(path, tmp_path) >= EVERY * 3
        assert any(thread.name == "toolrun-checkpoint" for thread in threading.enumerate())
    finally:
        database.close()


def test_a_process_that_only_reads_starts_no_thread(tmp_path):
    database = Database(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        before = sum(t.name == "toolrun-checkpoint" for t in threading.enumerate())
        for _ in range(EVERY * 2):
            database.ping()
        assert sum(t.name == "toolrun-checkpoint" for t in threading.enumerate()) == before
    finally:
        database.close()


def test_a_forked_child_checkpoints_on_a_thread_of_its_own(tmp_path):
    """A pool process forked from a process whose thread is checkpointing
    starts a thread of its own, and its checkpoints copy the log back: the
    fork waited for the parent's checkpoint, and the locks the child takes are
    its own (without the wait, a child hung on SQLite's mutex, or its every
    checkpoint was skipped). The forks are made in a process of their own
    (`checkpoint_fork.py`, whose exit code says which child failed and how):
    a child that hangs is killed by its alarm, never holds pytest past its
    timeout, and copies none of this process's other threads' locks."""
    script = Path(__file__).with_name("checkpoint_fork.py")
    done = run_fork_script(script, tmp_path / "ledger.db", 8)
    assert done.returncode == 0, done.stderr
