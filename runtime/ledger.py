"""The audit ledger: one row per batch, per call and per decision or transition
(the tables are in `runtime.ledger_tables`; re-exported here).

A side-effecting call whose decision cannot be recorded does not run, so every
write either lands or raises `LedgerUnavailable`, after retrying the faults that
pass (a dropped connection, a locked SQLite file). Everything stored is redacted
first; statuses and kinds are plain strings; times are aware and in UTC.
"""

from collections.abc import Callable
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import tenacity
from pydantic_core import to_jsonable_python
from sqlalchemy import create_engine, event, exc
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, select

from runtime import schema
from runtime.errors import InvalidBatch, LedgerRefused, LedgerUnavailable
from runtime.ledger_buffer import LedgerBuffer
from runtime.ledger_tables import (
    EVENT_TEXT,
    ApprovalRow,
    BatchRow,
    CallRow,
    EventKind,
    EventRow,
    utc_now,
)
from runtime.redaction import redact, redact_text
from runtime.results import ledger_summary
from runtime.settings import Settings
from runtime.types import Batch, ToolResult

__all__ = ["ApprovalRow", "BatchRow", "CallRow", "EventKind", "EventRow", "Ledger"]

T = TypeVar("T")
SQLITE_BUSY_MS = 30_000


class Ledger:
    """The ledger in one database. One per process (a forked child makes its
    own: pooled connections must not cross a fork), shared by its threads."""

    def __init__(
        self, url: str, *, retry_seconds: float = 10.0, retry_attempts: int = 6, lazy: bool = False
    ) -> None:
        """`lazy`: a database unreachable now is not an error yet; its schema is
        checked on first use (a worker's pool process must not lose the call it
        started for because the ledger was down that moment)."""
        self._engine = _engine(url, busy_seconds=min(SQLITE_BUSY_MS / 1000, retry_seconds))
        # SQLite: a writer takes the lock when it begins, so a read-then-write
        # transaction never fails on a stale snapshot (busy_timeout cannot help there).
        self._writer = self._engine.execution_options(toolrun_begin="IMMEDIATE")
        self._retry_seconds, self._retry_attempts = retry_seconds, retry_attempts
        self._buffer = LedgerBuffer()
        self._schema_checked = False
        try:
            self._check_schema()
        except LedgerUnavailable:
            if not lazy:
                raise

    @classmethod
    def from_settings(cls, settings: Settings, *, lazy: bool = False) -> "Ledger":
        return cls(settings.ledger_url, retry_seconds=settings.ledger_retry_seconds, lazy=lazy)

    def _check_schema(self) -> None:
        """The schema is Alembic's (`runtime.schema`): an empty database gets it
        here, through the migrations; any other is left to `toolrun db upgrade`."""
        self._run(lambda session: schema.bootstrap(session.connection()), checking=True)
        self._schema_checked = True

    def record_batch(
        self,
        batch: Batch,
        *,
        risks: dict[str, str | None] | None = None,
        policy_version: str | None = None,
    ) -> None:
        """The batch and its calls, pending (or as far as workers have already
        recorded them: these rows may have waited in a buffer). Recording a
        batch id again does nothing: a resubmitted batch keeps its first record."""
        ids = [call.id for call in batch.calls]
        if len(set(ids)) != len(ids):
            raise InvalidBatch(f"batch {batch.id} repeats call ids; each call needs its own")
        risks = risks or {}
        head = {"mode": _text(batch.mode), "workspace": batch.workspace, "on_error": batch.on_error}

        def work(session: Session) -> None:
            if session.get(BatchRow, batch.id) is not None:
                return
            count, version = len(batch.calls), policy_version
            session.add(BatchRow(id=batch.id, call_count=count, policy_version=version, **head))
            for position, call in enumerate(batch.calls):
                keys = {"batch_id": batch.id, "call_id": call.id, "position": position}
                risk, arguments = _text(risks.get(call.id)), _scrub(call.arguments)
                session.add(CallRow(**keys, tool=_text(call.name), risk=risk, arguments=arguments))
            session.flush()
            _settle(session, batch.id)

        try:
            self._run(work)
        except LedgerUnavailable as error:  # a concurrent recorder may have won the insert
            if not (isinstance(error.__cause__, exc.IntegrityError) and self.batch(batch.id)):
                raise

    def record_event(
        self, batch_id: str, call_id: str | None, kind: EventKind | str, **fields: Any
    ) -> None:
        """One event; `fields` are `EventRow` columns (an unknown one is a TypeError)."""
        row = _event_fields(batch_id, call_id, kind, **fields)
        self._run(lambda session: session.add(EventRow(**row)))

    def record_many(self, rows: list[EventRow]) -> None:
        """Several events in one transaction: all land or none do."""
        fields = [_event_fields(**row.model_dump(exclude={"id"})) for row in rows]
        self._run(lambda session: session.add_all([EventRow(**row) for row in fields]))

    def record_result(
        self,
        batch_id: str,
        result: ToolResult,
        *,
        kind: EventKind = EventKind.finished,
        **fields: Any,
    ) -> None:
        """The end of a call: its event and its call row, together or not at all.
        `fields` are further `EventRow` columns (the decision of a refused call)."""
        error = result.error
        meta = {"status": result.status, "worker": result.worker, "attempt": result.attempts}
        detail = ledger_summary(result)
        row = _event_fields(batch_id, result.call_id, kind, detail=detail, **meta, **fields)
        update = {
            "status": row["status"],
            "summary": _text(result.summary),
            "error_kind": _text(error.kind) if error else None,
            "error_message": _text(error.message) if error else None,
            "duration_ms": result.duration_ms,
            "attempts": result.attempts,
            "finished_at": row["at"],
        }

        def work(session: Session) -> None:
            session.add(EventRow(**row))
            call = session.get(CallRow, {"batch_id": batch_id, "call_id": result.call_id})
            if call is not None:  # a call never recorded keeps its event alone
                call.sqlmodel_update(update | {"worker": row["worker"] or call.worker})

        self._run(work)

    def mark_started(
        self, batch_id: str, call_id: str, *, worker: str | None, attempt: int
    ) -> None:
        """A started event and the call row marked running. `started_at` keeps
        the first start, so a retried call shows how long it has been going."""
        row = _event_fields(batch_id, call_id, EventKind.started, worker=worker, attempt=attempt)

        def work(session: Session) -> None:
            session.add(EventRow(**row))
            call = session.get(CallRow, {"batch_id": batch_id, "call_id": call_id})
            if call is not None:
                call.status, call.worker, call.attempts = "running", row["worker"], attempt
                call.started_at = call.started_at or row["at"]

        self._run(work)

    def batch(self, batch_id: str) -> BatchRow | None:
        return self._run(lambda session: session.get(BatchRow, batch_id), write=False)

    def calls(self, batch_id: str) -> list[CallRow]:
        query = select(CallRow).where(CallRow.batch_id == batch_id).order_by(CallRow.position)
        return self._run(lambda session: list(session.exec(query).all()), write=False)

    def events(self, batch_id: str, call_id: str | None = None) -> list[EventRow]:
        query = select(EventRow).where(EventRow.batch_id == batch_id)
        if call_id is not None:
            query = query.where(EventRow.call_id == call_id)
        query = query.order_by(EventRow.id)
        return self._run(lambda session: list(session.exec(query).all()), write=False)

    def close(self) -> None:
        self._engine.dispose()

    def eventually(self, work: Callable[[], object]) -> bool:
        """`work` (a write on this ledger) now, or once the ledger is back."""
        return self._buffer.write(work)

    def later(self, work: Callable[[], object]) -> None:
        """`work` once the ledger is back, without trying now (it just failed)."""
        self._buffer.keep(work)

    def transaction(self, work: Callable[[Session], T], *, write: bool = True) -> T:
        """`work(session)` in one transaction with the ledger's retries, for the
        stores that keep their own tables in the ledger (approvals)."""
        return self._run(work, write=write)

    def _run(
        self, work: Callable[[Session], T], *, write: bool = True, checking: bool = False
    ) -> T:
        """`work` in one transaction, retried on transient database faults; any
        database fault left becomes `LedgerUnavailable`, which callers fail closed on."""
        if not (checking or self._schema_checked):
            self._check_schema()

        def attempt() -> T:
            bind = self._writer if write else self._engine
            with Session(bind, expire_on_commit=False) as session, session.begin():
                return work(session)

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_transient),
            stop=tenacity.stop_after_attempt(self._retry_attempts)
            | tenacity.stop_after_delay(self._retry_seconds),
            wait=tenacity.wait_random_exponential(multiplier=0.05, max=2),
            reraise=True,
        )
        try:
            return retrying(attempt)
        except exc.SQLAlchemyError as error:
            tries = retrying.statistics.get("attempt_number", 1)
            cause = getattr(error, "orig", None) or error
            text = f"{type(cause).__name__}: {redact_text(' '.join(str(cause).split()))[:500]}"
            url = self._engine.url.render_as_string(hide_password=True)
            fault = LedgerUnavailable if _transient(error) else LedgerRefused
            raise fault(f"ledger {url}: {tries} attempt(s) failed: {text}") from error


def _settle(session: Session, batch_id: str) -> None:
    """Call rows written late take the starts and ends recorded before them."""
    query = select(EventRow).where(EventRow.batch_id == batch_id).order_by(EventRow.id)
    for row in session.exec(query).all():
        call = session.get(CallRow, {"batch_id": batch_id, "call_id": row.call_id or ""})
        started = row.kind == EventKind.started.value
        if call is None or not (started or row.status):
            continue
        call.worker, call.attempts = row.worker or call.worker, row.attempt or call.attempts
        if started:
            call.status, call.started_at = "running", call.started_at or row.at
            continue
        detail = row.detail or {}
        error = detail.get("error") or {}
        call.status, call.finished_at = row.status, row.at
        call.duration_ms, call.summary = detail.get("duration_ms"), _text(detail.get("summary"))
        call.error_kind, call.error_message = _text(error.get("kind")), _text(error.get("message"))


def _engine(url: str, *, busy_seconds: float = SQLITE_BUSY_MS / 1000) -> Engine:
    """`postgresql://` gets psycopg 3; SQLite gets WAL and a busy timeout, so
    several processes can write one file, and its directory is made. The busy
    timeout is one attempt's wait for a lock: a ledger retrying for 5 s must not
    wait 30 s on a file some process keeps locked."""
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    database = parsed.database or ""
    if database not in ("", ":memory:") and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    connect_args = {"check_same_thread": False, "timeout": busy_seconds}
    engine = create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
    event.listen(engine, "connect", partial(_sqlite_connect, busy_ms=int(busy_seconds * 1000)))
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(connection: Any, _record: Any, *, busy_ms: int = SQLITE_BUSY_MS) -> None:
    connection.isolation_level = None  # BEGIN is ours: see `_sqlite_begin`
    cursor = connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    mode = connection.get_execution_options().get("toolrun_begin", "DEFERRED")
    connection.exec_driver_sql(f"BEGIN {mode}")


def _transient(error: BaseException) -> bool:
    if isinstance(error, exc.OperationalError | exc.DisconnectionError):
        return True
    if getattr(error, "connection_invalidated", False):
        return True
    return "database is locked" in str(error)


def _text(value: Any) -> str | None:
    """A column's text: an enum by value, everything redacted, no NUL (which
    PostgreSQL refuses in text, and a model may well send)."""
    if value is None:
        return None
    return redact_text(value.value if isinstance(value, Enum) else str(value)).replace(
        "\0", "\ufffd"
    )


def _scrub(value: Any) -> Any:
    """JSON-shaped and redacted, whatever a caller put in a JSON column."""
    return redact(to_jsonable_python(value, fallback=str))


def _event_fields(batch_id: str, call_id: str | None, kind: Any, **fields: Any) -> dict[str, Any]:
    """Checked, plain and redacted columns of one event. Built before any retry,
    so that each attempt inserts a fresh row."""
    unknown = sorted(set(fields) - EVENT_TEXT - {"at", "attempt", "detail"})
    if unknown:
        raise TypeError(f"unknown event field(s) {unknown}; known: {sorted(EVENT_TEXT)}")
    text = {name: _text(value) for name, value in fields.items() if name in EVENT_TEXT}
    return text | {
        "batch_id": batch_id,
        "call_id": call_id,
        "kind": EventKind(_text(kind)).value,
        "at": fields.get("at") or utc_now(),
        "attempt": fields.get("attempt"),
        "detail": _scrub(fields.get("detail")),
    }
