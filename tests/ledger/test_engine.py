"""The ledger's SQLite engine: a writer waits for another's lock in its own
short naps (`ledger/engine.py`, docs/architecture.md "The ledger"), up to its
busy budget, and then fails as locked, as SQLAlchemy reports it."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from sqlalchemy import exc, text

from runtime.ledger.engine import engine, transient, writer


def _held(path) -> sqlite3.Connection:
    """Another connection holding the file's write lock, as another process would."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "ledger.db"
    found = writer(engine(f"sqlite:///{path}"))
    with found.begin() as connection:
        connection.execute(text("CREATE TABLE t (n INTEGER)"))
    yield path, found
    found.dispose()


def test_a_writer_waits_for_the_lock_and_writes_once_it_is_let_go(database):
    path, found = database
    holder = _held(path)
    let_go, wrote = threading.Event(), []

    def write() -> None:
        with found.begin() as connection:
            wrote.append(let_go.is_set())  # the lock is ours only once the holder let go
            connection.execute(text("INSERT INTO t VALUES (1)"))

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(0.3)  # it waits, however busy the machine
    assert thread.is_alive() and wrote == []
    let_go.set()
    holder.execute("COMMIT")
    thread.join(30)
    assert wrote == [True]
    with found.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM t")).scalar() == 1


def test_a_writer_past_its_budget_fails_as_locked_and_reads_never_wait(database):
    path, _ = database
    impatient = writer(engine(f"sqlite:///{path}", busy_seconds=0.2))
    holder = _held(path)
    try:
        with pytest.raises(exc.OperationalError, match="database is locked") as error:
            with impatient.begin() as connection:
                connection.execute(text("INSERT INTO t VALUES (2)"))
        assert transient(error.value)  # the ledger's retrying takes it from here
        reader = engine(f"sqlite:///{path}")
        with reader.connect() as connection:  # WAL: a reader reads past the writer
            assert connection.execute(text("SELECT count(*) FROM t")).scalar() == 0
        reader.dispose()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        impatient.dispose()
