"""The ledger's database engine: psycopg 3 for PostgreSQL; for SQLite, WAL,
a busy timeout, writers that lock when they begin, and which faults pass.

SQLite runs WAL with `synchronous=NORMAL`: a commit survives any process
crash (a killed worker, a killed client), and only an OS crash or a power cut
can take the last commits back. `FULL` would fsync on every commit, about
three times the cost of a ledger row on this kind of machine; the production
ledger is PostgreSQL, with its own durability settings.
"""

from __future__ import annotations

import random
import sqlite3
import time
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, exc
from sqlalchemy.engine import Engine, make_url

from runtime.ledger import write_turn

SQLITE_BUSY_MS = 30_000
IDLE_IN_TRANSACTION_MS = 30_000  # PostgreSQL ends a session idle that long in a transaction
CACHE_KIB = 512  # page cache per SQLite connection (SQLite's default is 2,000 KiB)


def engine(url: str, *, busy_seconds: float = SQLITE_BUSY_MS / 1000) -> Engine:
    """`postgresql://` gets psycopg 3; SQLite gets WAL and a busy timeout, so
    several processes can write one file, and its directory is made. The busy
    timeout is one attempt's wait for a lock: a ledger retrying for 5 s must not
    wait 30 s on a file some process keeps locked."""
    parsed = _parsed(url)
    if parsed.get_backend_name() != "sqlite":
        # A lock wait is bounded like SQLite's busy timeout, and a session a frozen or
        # dead process left inside a transaction is ended by the server, locks and all.
        options = (
            f"-c lock_timeout={int(busy_seconds * 1000)} "
            f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
        )
        # A server can drop a connection: pre-ping.
        return create_engine(parsed, pool_pre_ping=True, connect_args={"options": options})
    database = parsed.database or ""
    if database not in ("", ":memory:") and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    connect_args = {"check_same_thread": False, "timeout": busy_seconds}
    # A file never drops a connection (no pre-ping). One writer at a time holds
    # the lock anyway, so a few pooled connections do; each keeps its own cache.
    found = create_engine(parsed, connect_args=connect_args, pool_size=4, max_overflow=4)
    event.listen(found, "connect", partial(_sqlite_connect, busy_ms=int(busy_seconds * 1000)))
    event.listen(found, "begin", partial(_sqlite_begin, busy_seconds=busy_seconds))
    return found


def load_driver(url: str) -> None:
    """Import the database's driver (its DBAPI module: sqlite3, psycopg) now.
    A prefork worker calls this before it forks its pool, so its processes
    share the driver's pages instead of each importing its own copy when it
    first builds its engine (docs/architecture.md, "Round trips and memory").
    A driver that is not installed is left for `engine` to report."""
    try:
        _parsed(url).get_dialect().import_dbapi()
    except ImportError:
        pass


def _parsed(url: str):
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def writer(found: Engine) -> Engine:
    """SQLite: a writer takes the lock when it begins, so a read-then-write
    transaction never fails on a stale snapshot (busy_timeout cannot help there)."""
    return found.execution_options(toolrun_begin="IMMEDIATE")


def _nap(waited: float) -> float:
    """A lock waiter's nap: 1-3 ms, 3-10 ms once it has waited 200 ms."""
    return random.uniform(0.001, 0.003) if waited < 0.2 else random.uniform(0.003, 0.01)


def transient(error: BaseException) -> bool:
    """A fault that passes: a dropped connection, a locked SQLite file."""
    if isinstance(error, exc.OperationalError | exc.DisconnectionError):
        return True
    if getattr(error, "connection_invalidated", False):
        return True
    return "database is locked" in str(error)


def locked(error: BaseException) -> bool:
    """A lock wait that ran out: SQLite's busy timeout, PostgreSQL's lock_timeout."""
    said = str(error)
    return "database is locked" in said or "lock timeout" in said


def _sqlite_connect(connection: Any, _record: Any, *, busy_ms: int = SQLITE_BUSY_MS) -> None:
    connection.isolation_level = None  # BEGIN is ours: see `_sqlite_begin`
    cursor = connection.cursor()
    cursor.execute("PRAGMA busy_timeout = 0")
    # A new, empty file only (before WAL; a no-op on any other): a pruned ledger
    # gives its free pages back in short steps (`retention.py`). Tried once:
    # locked, another process is making the file and sets it.
    try:
        cursor.execute("PRAGMA auto_vacuum = INCREMENTAL")
    except sqlite3.OperationalError:
        pass
    cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")  # per connection; see the module's docstring
    cursor.execute(f"PRAGMA cache_size = -{CACHE_KIB}")  # the ledger writes; it rarely rereads
    # A writer waits for the lock in `_begin_immediate`, not in SQLite's busy
    # handler; in WAL mode nothing else of ours waits on another writer.
    cursor.execute("PRAGMA busy_timeout = 0")
    cursor.close()


def _sqlite_begin(connection: Any, *, busy_seconds: float = SQLITE_BUSY_MS / 1000) -> None:
    """BEGIN as the connection's execution options say; a writer's, in
    short naps (`_begin_immediate`)."""
    mode = connection.get_execution_options().get("toolrun_begin", "DEFERRED")
    if mode != "IMMEDIATE":
        connection.exec_driver_sql(f"BEGIN {mode}")
        return
    _begin_immediate(connection, busy_seconds)


def _begin_immediate(connection: Any, busy_seconds: float) -> None:
    """Take the write lock, waiting up to `busy_seconds` for it in short naps.

    SQLite's own busy handler naps 1, 2, 5, 10, 15, 20, 25 ... up to 100 ms
    between tries, so when the sixteen pool processes of a reads worker end
    their calls at once, the last writer waited up to 0.4 s for a lock that
    was free again within 30 ms (docs/architecture.md, "The ledger"). Here a
    waiter tries again after 1-3 ms for its first 200 ms, then after
    3-10 ms: the lock is taken soon after it is let go, and one held long (a
    frozen process) costs each waiter a try every few ms. Every try but the
    last is the driver's own, a few microseconds (through SQLAlchemy, the
    first cost a transaction about 30 us); while statements are listened for
    (`runtime.ledger.prepared`), the first goes through SQLAlchemy, which
    tells them.
    """
    busy_seconds = write_turn.left_of(busy_seconds)  # less what waiting for the turn took
    driver = connection.connection.dbapi_connection
    nap = False
    if connection.dispatch.before_cursor_execute:  # listened for: the first try tells them
        try:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            return
        except exc.OperationalError as error:
            if "database is locked" not in str(error):
                raise
        nap = True
    began = time.monotonic()
    while (waited := time.monotonic() - began) < busy_seconds:
        if nap:
            time.sleep(_nap(waited))
        nap = True
        try:
            driver.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as error:
            if "database is locked" not in str(error):
                break
    connection.exec_driver_sql("BEGIN IMMEDIATE")  # its last try: SQLAlchemy's error if it fails
