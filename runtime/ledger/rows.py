"""How the ledger's rows are made and written inside one transaction: checked,
plain and redacted columns, and SQL statements rather than ORM objects on the
hot path (a call's rows cost two statements, not a load and a flush)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from enum import Enum, IntEnum
from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import Connection, Insert, bindparam, func, insert, select, update
from sqlalchemy import text as sql

from runtime.ledger.dialects import insert_for
from runtime.ledger.prepared import Prepared, storable
from runtime.ledger.tables import (
    EVENT_TEXT,
    BatchOwnerRow,
    BatchRow,
    CallRow,
    EndRow,
    EventKind,
    EventRow,
    PlanRow,
    UsageRow,
    utc_now,
)
from runtime.redaction import BUILT_IN, Redactor
from runtime.registry import argument_limits
from runtime.types import Batch

BATCHES, CALLS, EVENTS = BatchRow.__table__, CallRow.__table__, EventRow.__table__
ENDS, USAGE = EndRow.__table__, UsageRow.__table__
OWNERS = BatchOwnerRow.__table__
# A batch's record, built once and run on the driver's cursor (`prepared`): each
# submit only binds its values (building the statements cost P1 about 0.7 ms a
# batch; `Connection.execute` of the built ones, 25 us or more each).
INSERT_CALLS, INSERT_EVENTS = Prepared(insert(CALLS)), Prepared(insert(EVENTS))
INSERT_PLAN = Prepared(insert(PlanRow.__table__))


def batch_columns(head: dict[str, Any]) -> dict[str, Any]:
    """`head`, checked: a column the batch row lacks is a programming error,
    which `.values()` raised and a statement's parameters silently drop."""
    if unknown := head.keys() - BATCHES.columns.keys():
        raise TypeError(f"the batch row has no column {', '.join(sorted(unknown))}")
    return head


@functools.cache
def owner_insert(dialect: str) -> Insert:
    """The gateway's owner row of a batch (`toolrun_batch_owner`), built once
    (each batch binds its values): a row there already stays as it is."""
    return insert_for(dialect)(OWNERS).on_conflict_do_nothing()


@functools.cache
def first_insert(dialect: str) -> Prepared:
    """The batch row's insert, the compare-and-set of its id: nothing is
    written and no id returned if it is recorded already."""
    statement = insert_for(dialect)(BATCHES).on_conflict_do_nothing()
    return Prepared(statement.returning(BATCHES.c.id), rows=True)


class Recorded(IntEnum):
    """What `record_batch` did; false when it wrote nothing."""

    found = 0  # recorded before (by another submitter of its key, or the sweep)
    new = 1  # recorded now
    ended = 2  # recorded now, and every call had ended already: the batch is over


def text(value: Any, redactor: Redactor = BUILT_IN) -> str | None:
    """A column's text: an enum by value, everything redacted, no NUL (which
    PostgreSQL refuses in text, and a model may well send), no lone surrogate.
    `redactor` is the ledger's (`Ledger.redactor`, from its settings)."""
    if value is None:
        return None
    found = redactor.redact_text(value.value if isinstance(value, Enum) else str(value))
    return storable(found).replace("\0", "\ufffd")  # a lone surrogate has no UTF-8


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
    row |= {
        "batch_id": batch_id,
        "call_id": storable(call_id),
        "kind": EventKind(text(kind)).value,
        "at": fields.get("at") or utc_now(),
        "attempt": fields.get("attempt"),
        "detail": scrub(fields.get("detail"), redactor),
    }
    return row | {"chain": None}  # its hash, made as it is inserted (runtime/ledger/chain.py)


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
    if len(keys) == 1:
        connection.execute(LOCK, {"space": LOCK_SPACE, "key": keys.pop()})
        return
    # One order of the keys themselves (two ids may share one), in one round
    # trip: retention locks a chunk of batches at once (`retention.py`).
    connection.execute(LOCK_MANY, {"space": LOCK_SPACE, "keys": sorted(keys)})


LOCK_SPACE = int.from_bytes(b"trb", "big")  # batch locks: apart from the migrators' lock
LOCK = sql("SELECT pg_advisory_xact_lock(:space, :key)")
LOCK_MANY = sql(
    "SELECT pg_advisory_xact_lock(:space, key) "
    "FROM (SELECT unnest(CAST(:keys AS integer[])) AS key ORDER BY 1) AS ordered"
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


def settle(connection: Connection, batch_id: str) -> set[str]:
    """Call rows written late take the starts and ends recorded before them
    (a read's worker may finish before its client records the batch): one
    update per call, from its events in the order they were written. The
    calls that have ended so."""
    changes: dict[str, dict[str, Any]] = {}
    if ANY_EVENT.first(connection, {"batch_id": batch_id}) is None:
        return set()  # the record came first, as it mostly does: nothing to take
    for row in connection.execute(SETTLE_EVENTS, {"batch_id": batch_id}):
        started = row.kind == STARTED
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
    if changes:  # a column with no value keeps its own (COALESCE): what `values` left out
        rows = [
            dict.fromkeys(SETTLED, None) | values | {"key_batch_id": batch_id, "key_call_id": c}
            for c, values in changes.items()
        ]
        connection.execute(SETTLE_CALLS, rows)
    return {call_id for call_id, values in changes.items() if "finished_at" in values}


STARTED = EventKind.started.value
# `settle`'s statements, built once (building them per batch cost P1 about 0.2 ms).
SETTLE_EVENTS = (
    select(
        EVENTS.c.call_id,
        EVENTS.c.kind,
        EVENTS.c.at,
        EVENTS.c.worker,
        EVENTS.c.attempt,
        EVENTS.c.status,
        EVENTS.c.detail,
    )
    .where(EVENTS.c.batch_id == bindparam("batch_id"))
    .order_by(EVENTS.c.id)
)
# Whether it has any event yet: read on the driver's cursor, since its times and
# details would need converting; the events themselves only when there are some.
ANY_EVENT = Prepared(
    select(EVENTS.c.id).where(EVENTS.c.batch_id == bindparam("batch_id")).limit(1), rows=True
)
SETTLED = (
    "worker",
    "attempts",
    "started_at",
    "status",
    "finished_at",
    "duration_ms",
    "summary",
    "error_kind",
    "error_message",
)
SETTLE_CALLS = (
    update(CALLS)
    .where(CALLS.c.batch_id == bindparam("key_batch_id"))
    .where(CALLS.c.call_id == bindparam("key_call_id"))
    .values(
        {
            name: func.coalesce(bindparam(name, type_=CALLS.c[name].type), CALLS.c[name])
            for name in SETTLED
        }
    )
)


def event_rows(
    rows: Iterable[EventRow | dict[str, Any]], redactor: Redactor
) -> list[dict[str, Any]]:
    """Checked, redacted columns of events given as rows or as their fields."""
    found = []
    for row in rows:
        fields = row if isinstance(row, dict) else row.model_dump(exclude={"id", "chain"})
        found.append(
            event_fields(
                **{k: v for k, v in fields.items() if k not in ("id", "chain")}, redactor=redactor
            )
        )
    return found
