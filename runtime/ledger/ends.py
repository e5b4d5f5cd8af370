"""A call's end as ledger rows: its end row (the compare-and-set that decides
which end a call has), its events, its call row's change and its usage row,
written inside the caller's transaction (docs/architecture.md, "One end per
call")."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlmodel import Session

from runtime.ledger.batches import mark_ended
from runtime.ledger.chain import end_hash, event_hash, stamped
from runtime.ledger.dialects import insert_for
from runtime.ledger.prepared import Prepared
from runtime.ledger.rows import CALLS, ENDS, EVENTS, USAGE, event_fields, lock_batches, scrub, text
from runtime.ledger.tables import EventKind
from runtime.redaction import BUILT_IN, Redactor
from runtime.results.formatter import ledger_summary
from runtime.types import ToolResult


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
        close: bool = False,
        **fields: Any,
    ) -> None:
        """`unclaimed`: end the call only while no worker has claimed it (a side
        effect said not to have started must not be running). `redactor`: the
        ledger's (`Ledger.redactor`). `close`: this may be its batch's last end
        (its last stage's only call): if every call has its end once it is
        written, the batch is marked ended in the same transaction (`closed`)."""
        self.unclaimed, self.close, self.closed = unclaimed, close, False
        # Once written: whether the call had its row then (False: its batch was
        # sent before its record, which will settle this call and may end the batch).
        self.call_recorded: bool | None = None
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
        self.result = result
        self.end = {
            "batch_id": batch_id,
            "call_id": result.call_id,
            "status": row["status"],
            "result": result.model_dump(mode="json"),
            "at": row["at"],
        }
        self.end["chain"] = None  # its hash, made as it is inserted (runtime/ledger/chain.py)
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

    def yielding(self, announced: ToolResult | None, redactor: Redactor) -> CallEnd:
        """This end, or the end announced for its call if that is another: a
        row kept while the ledger was away yields to the end published first,
        which is the one the caller got (docs/architecture.md, "One end per call")."""
        if announced is None or announced == self.result:
            return self
        return CallEnd(
            self.batch_id, announced, unclaimed=self.unclaimed, redactor=redactor, close=self.close
        )

    def write(self, connection: Connection | Session, *, usage: bool = True) -> bool:
        """The end row, if the call has none yet, then the events, the call
        row (if there is one: a call never recorded keeps its events alone)
        and (`usage`) the usage row. False, writing nothing, if another
        reporter ended the call first."""
        if isinstance(connection, Session):
            connection = connection.connection()
        if self.unclaimed and not _pending(connection, self.batch_id, self.call_id):
            return False
        if not claim_end(connection, stamped(connection, [self.end], end_hash)[0]):
            return False
        INSERT_EVENTS.execute_many(connection, stamped(connection, self.events, event_hash))
        self.call_recorded = END_CALL.execute(connection, self.values) > 0
        if usage:
            INSERT_USAGE.execute(connection, self.usage)
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


def claim_end(connection: Connection, end: dict[str, Any]) -> bool:
    """Insert a call's end row unless it has one: the one compare-and-set that
    decides which end a call has (docs/architecture.md, "One end per call")."""
    return _claim_end_statement(connection.dialect.name).first(connection, end) is not None


def write_ends(connection: Connection, ends: list[CallEnd]) -> list[bool]:
    """Several ends in the caller's transaction, each batch's lock taken first;
    for each, whether it ended its call (False: the call had ended already).
    An end that may be its batch's last (`CallEnd.close`) marks the batch
    ended here if every call has its end now, where a second transaction
    did it after the end's publish (docs/architecture.md, "Round trips and
    memory")."""
    lock_batches(connection, {end.batch_id for end in ends})
    ended = [end.write(connection, usage=False) for end in ends]
    for end, first in zip(ends, ended, strict=True):
        closing = first and end.close and end.call_recorded  # no call row: no batch row yet
        end.closed = bool(closing) and mark_ended(connection, end.batch_id)
    usage = [end.usage for end, first in zip(ends, ended, strict=True) if first]
    if usage:  # one statement for the group's usage rows
        INSERT_USAGE.execute_many(connection, usage)
    return ended


# The statements of a call's end, built once: one built per call cost its
# construction and its cache key on every end, about half of a pool process's
# CPU for a read; and run on the driver's cursor (`runtime.ledger.prepared`)
# (docs/architecture.md, "Round trips and memory"). The end row's insert by
# dialect's name, with RETURNING, not rowcount: psycopg reports -1 for an
# INSERT ... ON CONFLICT.
@functools.cache
def _claim_end_statement(dialect: str) -> Prepared:
    return Prepared(
        insert_for(dialect)(ENDS).on_conflict_do_nothing().returning(ENDS.c.call_id), rows=True
    )


INSERT_EVENTS, INSERT_USAGE = Prepared(insert(EVENTS)), Prepared(insert(USAGE))
# A call's row at its end.
END_CALL = Prepared(
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
