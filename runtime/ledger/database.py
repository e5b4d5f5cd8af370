"""One ledger database: its engines, its schema check and every transaction's
retries. A write either lands or raises `LedgerUnavailable` (a fault that may
pass: a dropped connection, a locked SQLite file, retried first) or
`LedgerRefused` (one that will not); `runtime.ledger.store.Ledger` builds the
ledger's rows on it (docs/architecture.md, "The ledger")."""

import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any, TypeVar

import tenacity
from sqlalchemy import exc, text
from sqlalchemy.engine import URL
from sqlmodel import Session

from runtime.errors import LedgerRefused, LedgerUnavailable
from runtime.ledger import engine as ledger_engine
from runtime.ledger import schema
from runtime.ledger.chain import SEAL_KEY
from runtime.ledger.checkpoint import Checkpoints
from runtime.ledger.write_hold import WriteHold
from runtime.ledger.write_turn import WriteTurn
from runtime.redaction import BUILT_IN, Redactor

T = TypeVar("T")
FIRST_WAIT = 0.05  # seconds, at most, before the first retry; each next waits up to twice as long


class Database:
    """A ledger database, shared by a process's threads (a forked child makes
    its own: pooled connections must not cross a fork)."""

    def __init__(
        self,
        url: str,
        *,
        retry_seconds: float = 10.0,
        retry_attempts: int = 6,
        lazy: bool = False,
        redactor: Redactor = BUILT_IN,
        seal_key: bytes | None = None,
    ) -> None:
        """`lazy`: a database unreachable now is not an error yet; its schema is
        checked on first use (a worker's pool process must not lose the call it
        started for because the ledger was down that moment). `redactor`: what
        every row is redacted with, and what those who build rows for this
        ledger pass on (`CallEnd`, `event_fields`)."""
        self.redactor = redactor
        self._seal_key = seal_key  # what signs a batch's seal when it ends (`chain.py`)
        busy = min(ledger_engine.SQLITE_BUSY_MS / 1000, retry_seconds)
        self._engine = ledger_engine.engine(url, busy_seconds=busy)
        self._writer = ledger_engine.writer(self._engine)
        self._retry_seconds, self._retry_attempts = retry_seconds, retry_attempts
        # SQLite: a fork waits for writes and reads under way (`write_hold.py`).
        self._reads_held = self._engine.dialect.name == "sqlite"
        self._hold = WriteHold(at_fork=self._reads_held)
        self._turn = _turn(self._engine.url, busy)
        # SQLite's checkpoints, made by a thread, not in a commit (`checkpoint.py`).
        self._checkpoints = Checkpoints(self._engine) if self._turn else None
        self._schema_checked = False
        try:
            self._check_schema()
        except LedgerUnavailable:
            if not lazy:
                raise

    def _check_schema(self) -> None:
        """The schema is Alembic's (`runtime.ledger.schema`): an empty database gets it
        here, through the migrations; any other is left to `toolrun db upgrade`. A
        read tells which, so a process starts, and reads, while another holds the
        write lock (docs/architecture.md, "The ledger")."""
        if not self._run(schema.present, write=False, checking=True, core=True):
            self._run(lambda session: schema.bootstrap(session.connection()), checking=True)
        self._schema_checked = True

    def ping(self) -> None:
        """Raise `LedgerUnavailable` unless the database answers a query."""
        self._read(lambda c: c.execute(text("SELECT 1")))

    def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.close()
        self._engine.dispose()

    def transaction(self, work: Callable[[Any], T], *, write: bool = True, core: bool = False) -> T:
        """`work(session)` in one transaction with the ledger's retries, for the
        stores in `runtime/ledger/` that keep their own tables (approvals, keys);
        `core`: `work(connection)`, for SQL statements alone (cheaper). Nothing
        outside `runtime/ledger/` holds a connection (docs/architecture.md,
        "The ledger")."""
        return self._run(work, write=write, core=core)

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self._engine.dialect.name

    def outside_transaction(self, work: Callable[[Any], T]) -> T:
        """`work(driver_connection)` with no transaction open, for what cannot
        run in one (`VACUUM`, in `runtime.ledger.retention`), holding this
        process's writer's turn; SQLite waits for the lock up to the ledger's
        retry seconds."""
        turn = self._turn.taken() if self._turn else nullcontext()
        with self._hold.writing(), turn, self._engine.connect() as connection:
            raw = connection.connection.driver_connection
            if self.dialect == "postgresql":
                raw.rollback()  # the pool's ping may have begun one
                raw.autocommit = True
                try:
                    return work(raw)
                finally:
                    raw.autocommit = False
            raw.execute(f"PRAGMA busy_timeout = {int(self._retry_seconds * 1000)}")
            try:
                return work(raw)
            finally:
                raw.execute("PRAGMA busy_timeout = 0")

    def _read(self, statement: Callable[..., T], *args: Any, **options: Any) -> T:
        return self._run(lambda c: statement(c, *args, **options), write=False, core=True)

    def _run(
        self,
        work: Callable[[Any], T],
        *,
        write: bool = True,
        checking: bool = False,
        core: bool = False,
    ) -> T:
        """`work(session)` (`core`: `work(connection)`) in one transaction,
        retried on transient database faults; any database fault left becomes
        `LedgerUnavailable`, which callers fail closed on."""
        if not (checking or self._schema_checked):
            self._check_schema()

        def attempt() -> T:
            bind = self._writer if write else self._engine
            turn = self._turn.taken() if write and self._turn else nullcontext()
            if write:
                hold = self._hold.writing()
            else:
                hold = self._hold.reading() if self._reads_held else nullcontext()
            with hold, turn:
                if core:  # SQL statements only: a connection, without a session's bookkeeping
                    with bind.begin() as connection:
                        connection.info[SEAL_KEY] = self._seal_key
                        done = work(connection)
                else:
                    with Session(bind, expire_on_commit=False) as session, session.begin():
                        session.connection().info[SEAL_KEY] = self._seal_key
                        done = work(session)
            if write and self._checkpoints is not None:
                self._checkpoints.committed()
            return done

        began = time.monotonic()
        try:  # most transactions land at once: retries are built for those that do not
            return attempt()
        except exc.SQLAlchemyError as error:
            if not ledger_engine.transient(error) or self._retry_attempts < 2:
                raise self._fault(error, 1) from error
            first = error
        time.sleep(random.uniform(0, FIRST_WAIT))
        left = self._retry_seconds - (time.monotonic() - began)
        if left <= 0:
            raise self._fault(first, 1) from first
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(ledger_engine.transient),
            stop=tenacity.stop_after_attempt(self._retry_attempts - 1)
            | tenacity.stop_after_delay(left),
            wait=tenacity.wait_random_exponential(multiplier=FIRST_WAIT, max=2),
            reraise=True,
        )
        try:
            return retrying(attempt)
        except exc.SQLAlchemyError as error:
            raise self._fault(error, 1 + retrying.statistics.get("attempt_number", 1)) from error

    def _fault(self, error: exc.SQLAlchemyError, tries: int) -> Exception:
        """`error` after `tries` attempts, as the ledger's own fault."""
        cause = getattr(error, "orig", None) or error
        text = self.redactor.redact_text(" ".join(str(cause).split()))
        said = f"{type(cause).__name__}: {text[:500]}"
        if ledger_engine.locked(error):
            said = (
                f"another process held its write lock for over {self._retry_seconds:g} s "
                f"(TOOLRUN_LEDGER_RETRY_SECONDS); {said}"
            )
        url = self._engine.url.render_as_string(hide_password=True)
        fault = LedgerUnavailable if ledger_engine.transient(error) else LedgerRefused
        return fault(f"ledger {url}: {tries} attempt(s) failed: {said}")


def _turn(url: URL, seconds: float) -> WriteTurn | None:
    """A writer's turn (`write_turn.py`) for an SQLite file; PostgreSQL's
    writers wait on its own locks, asleep."""
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    return None if database.startswith("file:") else WriteTurn(Path(database), seconds)
