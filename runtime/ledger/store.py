"""The audit ledger: one row per batch, per call and per decision or transition
(the tables are in `runtime.ledger.tables`; re-exported here).

A side-effecting call whose decision cannot be recorded does not run, so every
write either lands or raises `LedgerUnavailable` (the retries and the schema
are `runtime.ledger.database`'s). Everything stored is redacted first;
statuses and kinds are plain strings; times are aware and in UTC.
"""

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert
from sqlmodel import Session

from runtime import config
from runtime.errors import InvalidBatch, LedgerRefused, LedgerUnavailable, StackError
from runtime.ledger import batches, claims, open_batches
from runtime.ledger.buffer import LedgerBuffer
from runtime.ledger.chain import event_hash, stamped
from runtime.ledger.claims import Begun, Start
from runtime.ledger.ends import CallEnd, write_ends
from runtime.ledger.group import CommitGroup
from runtime.ledger.prepared import storable
from runtime.ledger.reads import LedgerReads
from runtime.ledger.rows import (
    EVENTS,
    INSERT_CALLS,
    INSERT_EVENTS,
    INSERT_PLAN,
    Recorded,
    batch_columns,
    batch_rows,
    event_fields,
    event_rows,
    first_insert,
    lock_batches,
    owner_insert,
    settle,
)
from runtime.ledger.tables import (
    ApprovalRow,
    BatchRow,
    CallRow,
    EventKind,
    EventRow,
    utc_now,
)
from runtime.redaction import redactor_for
from runtime.settings import Settings
from runtime.types import Batch, ToolResult

__all__ = ["ApprovalRow", "BatchRow", "CallEnd", "CallRow", "EventKind", "EventRow", "Ledger"]


class Ledger(LedgerReads):
    """The ledger in one database. One per process (a forked child makes its
    own: pooled connections must not cross a fork), shared by its threads."""

    def __init__(self, url: str, **options: Any) -> None:
        """`options` are `Database`'s (`runtime.ledger.database`)."""
        self._buffer = LedgerBuffer()
        self._announced: Callable[[str, str], ToolResult | None] | None = None
        self._group = CommitGroup(self._write_ends)
        super().__init__(url, **options)

    @classmethod
    def from_settings(cls, settings: Settings, *, lazy: bool = False) -> "Ledger":
        return cls(
            settings.ledger_url,
            retry_seconds=settings.ledger_retry_seconds,
            lazy=lazy,
            redactor=redactor_for(settings.redaction_patterns),
            seal_key=_signing_key(settings),
        )

    def record_batch(
        self,
        batch: Batch,
        *,
        risks: dict[str, str | None] | None = None,
        policy_version: str | None = None,
        events: Iterable[EventRow] = (),
        ends: Iterable[CallEnd] = (),
        plan: dict[str, Any] | None = None,
        columns: dict[str, Any] | None = None,
        open_cap: int | None = None,
        checked: bool = False,
        owner: dict[str, Any] | None = None,
    ) -> Recorded:
        """The batch and its calls, pending (or as far as workers have already
        recorded them: these rows may have waited in a buffer), with `events`
        (its decisions) and `ends` (calls refused before they were sent), all
        in one transaction. The batch row's insert is the compare-and-set:
        if its id (a submit key's) is recorded already, nothing at all is
        written and the answer is `Recorded.found` (false), so a resubmit or a
        racing submitter of the same key adds no decision and no end
        (docs/architecture.md, "Attach and keys"). `Recorded.ended`: every call
        had its end before the record landed (a batch of reads is sent before
        its record is written: "Sent before recorded"), so the batch is marked
        ended in the same transaction; its plan copy is the caller's to drop.
        `checked`: `events` are columns `event_fields` made with this ledger's
        redactor (a submitter's own record), written without a second pass.
        `owner`: the gateway key that submitted it (`toolrun_batch_owner`'s
        `key_id` and `key_name`), written with a new batch row, its `format`
        the batch's: no transaction of its own while the batch's reads end
        (docs/architecture.md, "The HTTP gateway")."""
        ids = [call.id for call in batch.calls]
        if len(set(ids)) != len(ids):
            raise InvalidBatch(f"batch {batch.id} repeats call ids; each call needs its own")
        head, calls = batch_rows(batch, risks or {}, policy_version, self.redactor)
        head = batch_columns(head | (columns or {}))  # key, fingerprint, deadline_at
        rows = list(events) if checked else event_rows(events, self.redactor)
        ends = list(ends)

        def work(connection: Connection) -> Recorded:
            lock_batches(connection, {batch.id})  # workers ending its calls wait (PostgreSQL)
            if first_insert(connection.dialect.name).first(connection, head) is None:
                return Recorded.found  # a batch recorded before keeps its first record, and only it
            if open_cap is not None:
                open_batches.check(connection, head.get("submitter"), open_cap)
            if owner is not None:
                row = {k: storable(v) for k, v in owner.items()}
                row |= {"batch_id": batch.id, "format": head.get("format"), "at": utc_now()}
                connection.execute(owner_insert(connection.dialect.name), row)
            INSERT_CALLS.execute_many(connection, calls)
            if plan is not None:
                INSERT_PLAN.execute(connection, {"batch_id": batch.id, "body": plan})
            ended = settle(connection, batch.id)
            INSERT_EVENTS.execute_many(connection, stamped(connection, rows, event_hash))
            for end in ends:
                end.write(connection)  # this batch's lock is held
            ended |= {end.call_id for end in ends}
            if ended >= set(ids) and batches.mark_ended(connection, batch.id):
                return Recorded.ended  # its reads' workers were quicker than this record
            return Recorded.new

        return self._run(work, core=True)

    def record_event(
        self, batch_id: str, call_id: str | None, kind: EventKind | str, **fields: Any
    ) -> None:
        """One event; `fields` are `EventRow` columns (an unknown one is a TypeError)."""
        row = event_fields(batch_id, call_id, kind, redactor=self.redactor, **fields)
        self._run(lambda c: c.execute(insert(EVENTS), stamped(c, [row], event_hash)), core=True)

    def record_many(self, rows: Iterable[EventRow | dict[str, Any]]) -> None:
        """Several events in one transaction: all land or none do."""
        fields = event_rows(rows, self.redactor)
        if fields:
            self._run(
                lambda c: c.execute(insert(EVENTS), stamped(c, fields, event_hash)), core=True
            )

    def record_end(self, end: CallEnd) -> bool:
        """A call's end with those of other calls ending now in this process,
        in one transaction (`runtime.ledger.group`); False if the call had
        ended already (then nothing of `end` was written)."""
        return self._group.write(self._yielding(end))

    def _write_ends(self, ends: list[CallEnd]) -> list[bool | BaseException]:
        """`ends` in one transaction; if the database refuses it, each on its
        own, so that one bad row loses no other."""
        try:
            return self._run(lambda connection: write_ends(connection, ends), core=True)
        except LedgerRefused:
            if len(ends) == 1:
                raise
        found: list[bool | BaseException] = []
        for end in ends:
            try:
                found += self._run(lambda c, end=end: write_ends(c, [end]), core=True)
            except (LedgerRefused, LedgerUnavailable) as error:
                found.append(error)
        return found

    def record_result(self, batch_id: str, result: ToolResult, **options: Any) -> bool:
        """The end of a call: its event and its call row, together or not at
        all. `options` are `CallEnd`'s: the event's `kind`, the `started_at` and
        `retries` of a call that claimed nothing (a read: all its rows in one
        transaction), further `EventRow` columns (the decision of a refusal)."""
        end = self._yielding(CallEnd(batch_id, result, redactor=self.redactor, **options))
        return self._run(lambda connection: write_ends(connection, [end]), core=True)[0]

    def announced_by(self, recall: Callable[[str, str], ToolResult | None]) -> None:
        """Where an end replayed from the buffer finds the end published for
        its call (batch id, call id), which it writes instead of its own."""
        self._announced = recall

    def _yielding(self, end: CallEnd) -> CallEnd:
        if self._announced is None or not self._buffer.replaying:
            return end
        return end.yielding(self._announced(end.batch_id, end.call_id), self.redactor)

    def mark_started(
        self, batch_id: str, call_id: str, *, worker: str | None, attempt: int
    ) -> None:
        """A started event and the call row marked running. `started_at` keeps
        the first start, so a retried call shows how long it has been going."""
        row = event_fields(
            batch_id,
            call_id,
            EventKind.started,
            worker=worker,
            attempt=attempt,
            redactor=self.redactor,
        )

        def work(session: Session) -> None:
            lock_batches(session.connection(), {batch_id})  # see `lock_batches`
            session.execute(insert(EVENTS), stamped(session.connection(), [row], event_hash))
            call = session.get(CallRow, {"batch_id": batch_id, "call_id": call_id})
            if call is not None:
                call.status, call.worker, call.attempts = "running", row["worker"], attempt
                call.started_at = call.started_at or row["at"]

        self._run(work)

    def claim(self, batch_id: str, call_id: str, *, worker: str | None) -> Begun:
        """Claim a side effect before it runs, with its started row: whether
        this delivery runs it (`runtime.ledger.claims`)."""
        return self._run(
            lambda c: claims.claim(c, batch_id, call_id, worker=worker, redactor=self.redactor),
            core=True,
        )

    def end_and_claim(
        self, end: CallEnd, batch_id: str, call_id: str, *, worker: str | None
    ) -> tuple[bool | None, Begun]:
        """A chain step's end and the claim of the step after it, in one
        transaction (docs/architecture.md, "A chain in one task"): whether
        the end ended its call, and the claim. An end that lost the
        compare-and-set claims nothing (`Start.taken`): its process was judged
        gone, and the step after is sent again by the sweep, not run by a
        holder that was fenced off ("Leases"). While rows of this process wait
        in its buffer, the end goes after them (None: it waits too) and the
        claim is made alone."""
        if len(self._buffer):
            ended: list[bool] = []
            self.eventually(
                lambda: ended.append(self._run(lambda c: write_ends(c, [end]), core=True)[0])
            )
            return (ended[0] if ended else None), self.claim(batch_id, call_id, worker=worker)

        def work(connection: Connection) -> tuple[bool, Begun]:
            [ended] = write_ends(connection, [end])
            if not ended:  # fenced off: its call was ended by another (judged lost)
                return ended, Begun(Start.taken, 0, None)
            claimed = claims.claim(
                connection, batch_id, call_id, worker=worker, redactor=self.redactor
            )
            return ended, claimed

        return self._run(work, core=True)

    def mark_ended(self, batch_id: str) -> bool:
        """Every call has ended: the batch ends at its last end's time, the
        sweep passes it by, and its plan (unredacted arguments) is deleted.
        False, changing nothing, while a call has no end in the ledger yet
        (it waits in some process's buffer: the sweep comes back)."""

        def work(connection: Connection) -> bool:
            lock_batches(connection, {batch_id})  # its seal sees every row (PostgreSQL)
            return batches.mark_ended(connection, batch_id)

        return self._run(work, core=True)

    def mark_cancelled(self, batch_id: str, *, by: str) -> datetime:
        """When the batch was cancelled (the first cancel counts); the time is
        taken inside the transaction, next to the write it dates."""
        return self._run(
            lambda c: batches.mark_cancelled(c, batch_id, by=by, at=utc_now()), core=True
        )

    def eventually(self, work: Callable[[], object]) -> bool:
        """`work` (a write on this ledger) now, or once the ledger is back."""
        return self._buffer.write(work)

    def quiet(self):
        """A context in which this process's other threads begin no ledger
        write: a tool runs (`runtime.ledger.write_hold`)."""
        return self._hold.quiet()

    def later(self, work: Callable[[], object]) -> None:
        """`work` once the ledger is back, without trying now (it just failed)."""
        self._buffer.keep(work)


def _signing_key(settings: Settings) -> bytes | None:
    """The key a batch's seal is signed with, if this process has one."""
    try:
        return config.signing_key(settings)
    except StackError:
        return None
