"""How the ledger's rows are made and written inside one transaction: checked,
plain and redacted columns, and SQL statements rather than ORM objects on the
hot path (a call's rows cost two statements, not a load and a flush)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlalchemy import text as sql
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session

from runtime.ledger.tables import (
    EVENT_TEXT,
    BatchRow,
    CallRow,
    EndRow,
    EventKind,
    EventRow,
    UsageRow,
    utc_now,
)
from runtime.redaction import BUILT_IN, Redactor
from runtime.registry import argument_limits
from runtime.results.formatter import ledger_summary
from runtime.types import Batch, ToolResult

BATCHES, CALLS, EVENTS = BatchRow.__table__, CallRow.__table__, EventRow.__table__
ENDS, USAGE = EndRow.__table__, UsageRow.__table__


def text(value: Any, redactor: Redactor = BUILT_IN) -> str | None:
    """A column's text: an enum by value, everything redacted, no NUL (which
    PostgreSQL refuses in text, and a model may well send), no lone surrogate.
    `redactor` is the ledger's (`Ledger.redactor`, from its settings)."""
    if value is None:
        return None
    found = redactor.redact_text(value.value if isinstance(value, Enum) else str(value))
    if not found.isascii():  # a lone surrogate has no UTF-8: no database stores it
        found = found.encode("utf-8", "replace").decode("utf-8")
    return found.replace("\0", "\ufffd")


def scrub(value: Any, redactor: Redactor = BUILT_IN) -> Any:
    """JSON-shaped and redacted, whatever a caller put in a JSON column."""
    return redactor.redact(to_jsonable_python(value, fallback=str))


def stored(arguments: Any, redactor: Redactor = BUILT_IN) -> Any:
    """A call's arguments as the ledger keeps them: redacted, and in their place
    a note when admission refuses them (a value JSON cannot carry, or too big)."""
    fault = argument_limits.fault(arguments)
    return scrub(arguments, redactor) if fault is None else {"not_stored": fault}


def event_fields(
    batch_id: str, call_id: str | None, kind: Any, *, redactor: Redactor = BUILT_IN, **fields: Any
) -> dict[str, Any]:
    """Checked, plain and redacted columns of one event. Built before any retry,
    so that each attempt inserts a fresh row."""
    unknown = sorted(set(fields) - EVENT_TEXT - {"at", "attempt", "detail"})
    if unknown:
        raise TypeError(f"unknown event field(s) {unknown}; known: {sorted(EVENT_TEXT)}")
    row = dict.fromkeys(EVENT_TEXT) | {
        name: text(value, redactor) for name, value in fields.items() if name in EVENT_TEXT
    }
    return row | {
        "batch_id": batch_id,
        "call_id": call_id,
        "kind": EventKind(text(kind)).value,
        "at": fields.get("at") or utc_now(),
        "attempt": fields.get("attempt"),
        "detail": scrub(fields.get("detail"), redactor),
    }


class CallEnd:
    """A call's end as rows: its events (a started one first when the worker
    writes both at once) and the change to its call row."""

    def __init__(
        self,
        batch_id: str,
        result: ToolResult,
        *,
        kind: EventKind = EventKind.finished,
        started_at: datetime | None = None,
        retries: Iterable[dict[str, Any]] = (),
        unclaimed: bool = False,
        redactor: Redactor = BUILT_IN,
        **fields: Any,
    ) -> None:
        """`unclaimed`: end the call only while no worker has claimed it (a side
        effect said not to have started must not be running). `redactor`: the
        ledger's (`Ledger.redactor`)."""
        self.unclaimed = unclaimed
        error = result.error
        meta = {"status": result.status, "worker": result.worker, "attempt": result.attempts}
        row = event_fields(
            batch_id,
            result.call_id,
            kind,
            detail=ledger_summary(result),
            redactor=redactor,
            **meta,
            **fields,
        )
        self.batch_id, self.call_id, self.events = batch_id, result.call_id, [row]
        self.end = {
            "batch_id": batch_id,
            "call_id": result.call_id,
            "status": row["status"],
            "result": result.model_dump(mode="json"),
            "at": row["at"],
        }
        self.usage = usage_fields(batch_id, result, row["at"], redactor)
        if started_at is not None:
            retries = list(retries)  # each one an attempt more than the start's
            start = event_fields(
                batch_id,
                result.call_id,
                EventKind.started,
                at=started_at,
                worker=result.worker,
                redactor=redactor,
                attempt=(result.attempts or 1) - len(retries),
            )
            self.events[:0] = [start, *retries]
        self.values: dict[str, Any] = {
            "key_batch_id": batch_id,
            "key_call_id": result.call_id,
            "status": row["status"],
            "summary": text(result.summary, redactor),
            "error_kind": text(error.kind, redactor) if error else None,
            "error_message": text(error.message, redactor) if error else None,
            "duration_ms": result.duration_ms,
            "attempts": result.attempts,
            "finished_at": row["at"],
            "new_worker": row["worker"],
            "new_started_at": started_at,
        }

    def write(self, connection: Connection | Session, *, usage: bool = True) -> bool:
        """The end row, if the call has none yet, then the events, the call
        row (if there is one: a call never recorded keeps its events alone)
        and (`usage`) the usage row. False, writing nothing, if another
        reporter ended the call first."""
        if self.unclaimed and not _pending(connection, self.batch_id, self.call_id):
            return False
        if not claim_end(connection, self.end):
            return False
        connection.execute(insert(EVENTS), self.events)
        connection.execute(END_CALL, self.values)
        if usage:
            connection.execute(insert(USAGE), self.usage)
        return True


def usage_fields(
    batch_id: str, result: ToolResult, at: datetime, redactor: Redactor = BUILT_IN
) -> dict[str, Any]:
    """A call's usage row (docs/architecture.md, "Usage and budgets"): its
    figures when a worker ran it, else only that it ended, and how."""
    usage = result.usage
    return {
        "batch_id": batch_id,
        "call_id": result.call_id,
        "tool": text(result.tool, redactor),
        "status": result.status.value,
        "at": at,
        "wall_ms": usage.wall_ms if usage else None,
        "cpu_ms": usage.cpu_ms if usage else None,
        "queue_ms": usage.queue_ms if usage else None,
        "approval_ms": usage.approval_ms if usage else None,
        "cost": usage.cost if usage else None,
        "reported": scrub(usage.reported, redactor) if usage and usage.reported else None,
    }


def _pending(connection: Connection | Session, batch_id: str, call_id: str) -> bool:
    where = (CALLS.c.batch_id == batch_id) & (CALLS.c.call_id == call_id)
    status = connection.execute(select(CALLS.c.status).where(where).with_for_update()).scalar()
    return status in (None, "pending")


def claim_end(connection: Connection | Session, end: dict[str, Any]) -> bool:
    """Insert a call's end row unless it has one: the one compare-and-set that
    decides which end a call has (docs/architecture.md, "One end per call")."""
    dialect = (
        connection.get_bind().dialect if isinstance(connection, Session) else connection.dialect
    )
    make = postgresql_insert if dialect.name == "postgresql" else sqlite_insert
    # RETURNING, not rowcount: psycopg reports -1 for an INSERT ... ON CONFLICT.
    statement = make(ENDS).values(**end).on_conflict_do_nothing().returning(ENDS.c.call_id)
    return connection.execute(statement).first() is not None


def write_ends(connection: Connection, ends: list[CallEnd]) -> list[bool]:
    """Several ends in the caller's transaction, each batch's lock taken first;
    for each, whether it ended its call (False: the call had ended already)."""
    lock_batches(connection, {end.batch_id for end in ends})
    ended = [end.write(connection, usage=False) for end in ends]
    usage = [end.usage for end, first in zip(ends, ended, strict=True) if first]
    if usage:  # one statement for the group's usage rows
        connection.execute(insert(USAGE), usage)
    return ended


def lock_batches(connection: Connection, batch_ids: set[str]) -> None:
    """PostgreSQL: hold, until the transaction ends, each batch's lock (in one
    order: no deadlock), so that a client recording a batch and a worker ending
    one of its calls take turns. Otherwise, in READ COMMITTED, the worker's
    update can miss the call row the client has not committed yet while the
    client's `settle` misses the worker's events: the call would stay pending.
    SQLite takes one writer at a time already."""
    if connection.dialect.name != "postgresql":
        return
    keys = {
        int.from_bytes(hashlib.blake2b(b.encode(), digest_size=4).digest(), "big") - 2**31
        for b in batch_ids
    }
    for key in sorted(keys):  # one order of the keys themselves: two ids may share one
        connection.execute(LOCK, {"space": LOCK_SPACE, "key": key})


LOCK_SPACE = int.from_bytes(b"trb", "big")  # batch locks: apart from the migrators' lock
LOCK = sql("SELECT pg_advisory_xact_lock(:space, :key)")

# One statement, built once (its compiled form is cached): a call's row at its end.
END_CALL = (
    update(CALLS)
    .where(CALLS.c.batch_id == bindparam("key_batch_id"))
    .where(CALLS.c.call_id == bindparam("key_call_id"))
    .values(
        status=bindparam("status"),
        summary=bindparam("summary"),
        error_kind=bindparam("error_kind"),
        error_message=bindparam("error_message"),
        duration_ms=bindparam("duration_ms"),
        attempts=bindparam("attempts"),
        finished_at=bindparam("finished_at"),
        worker=func.coalesce(bindparam("new_worker", type_=CALLS.c.worker.type), CALLS.c.worker),
        started_at=func.coalesce(
            CALLS.c.started_at, bindparam("new_started_at", type_=CALLS.c.started_at.type)
        ),
    )
)


def batch_rows(
    batch: Batch,
    risks: dict[str, Any],
    policy_version: str | None,
    redactor: Redactor = BUILT_IN,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The batch's row and its calls' rows, pending."""
    head = {
        "id": batch.id,
        "mode": text(batch.mode),
        "workspace": batch.workspace,
        "on_error": batch.on_error,
        "call_count": len(batch.calls),
        "policy_version": policy_version,
        "created_at": utc_now(),
    }
    calls = [
        {
            "batch_id": batch.id,
            "call_id": call.id,
            "position": position,
            "tool": text(call.name, redactor),
            "kind": text(call.kind, redactor),
            "risk": text(risks.get(call.id)),
            "status": "pending",
            "arguments": stored(call.arguments, redactor),
            "attempts": 0,
        }
        for position, call in enumerate(batch.calls)
    ]
    return head, calls


def settle(connection: Connection, batch_id: str) -> None:
    """Call rows written late take the starts and ends recorded before them
    (a read's worker may finish before its client records the batch): one
    update per call, from its events in the order they were written."""
    query = select(EVENTS).where(EVENTS.c.batch_id == batch_id).order_by(EVENTS.c.id)
    changes: dict[str, dict[str, Any]] = {}
    for row in connection.execute(query).all():
        started = row.kind == EventKind.started.value
        if not (started or row.status):
            continue
        values = changes.setdefault(row.call_id or "", {})
        values["worker"] = row.worker or values.get("worker")
        values["attempts"] = row.attempt or values.get("attempts")
        if started:
            values.setdefault("started_at", row.at)
            values.setdefault("status", "running")
            continue
        detail = row.detail or {}
        error = detail.get("error") or {}
        values |= {
            "status": row.status,
            "finished_at": row.at,
            "duration_ms": detail.get("duration_ms"),
            "summary": text(detail.get("summary")),
            "error_kind": text(error.get("kind")),
            "error_message": text(error.get("message")),
        }
    for call_id, values in changes.items():
        where = (CALLS.c.batch_id == batch_id) & (CALLS.c.call_id == call_id)
        known = {name: value for name, value in values.items() if value is not None}
        connection.execute(update(CALLS).where(where).values(known))
