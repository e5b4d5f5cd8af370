"""What the ledger is asked, never written: a batch's plan, progress and
ends, its rows, a conversation's turns, usage. `Ledger` (runtime/ledger/store.py)
is these reads and its writes, on one `Database`."""

from datetime import datetime
from typing import Any

from sqlmodel import select

from runtime.ledger import batches, chain, open_batches, snapshot, turn_seal, usage
from runtime.ledger.database import Database
from runtime.ledger.snapshot import BatchSnapshot
from runtime.ledger.tables import BatchRow, CallRow, EventRow, utc_now
from runtime.types import ToolResult


class LedgerReads(Database):
    def plan(self, batch_id: str) -> dict[str, Any] | None:
        """The batch's plan, or None once it has ended or if it was never recorded."""
        return self._read(batches.plan, batch_id)

    def progress(self, batch_id: str, *, with_plan: bool = False) -> batches.Progress:
        """The batch's cancel, ends and claims (`with_plan`: and its plan), in
        one read transaction: what an advance reads (`runtime.batch.advance`)."""
        return self._read(batches.progress, batch_id, with_plan=with_plan)

    def ends(self, batch_id: str) -> dict[str, ToolResult]:
        """The results of the batch's calls that have ended, by call id."""
        return self._read(batches.ends, batch_id)

    def claimed(self, batch_id: str) -> dict[str, datetime]:
        """Calls a worker has claimed and not ended (a side effect claims before
        it runs), with when each was claimed."""
        return self._read(batches.claimed, batch_id)

    def needing_attention(self, *, now: datetime, stale_before: datetime) -> batches.Attention:
        """Open batches past their deadline, cancelled, or old enough that a lost
        message or a lost hand-on could be holding them up; and pending
        approvals past their expiry. One statement: what an idle sweep reads."""
        return self._read(batches.needing_attention, now=now, stale_before=stale_before)

    def open_batches(self, submitter: str) -> int:
        """How many of `submitter`'s batches are open (`limits.size.open_batches_per_key`)."""
        return self._read(open_batches.count, submitter, now=utc_now())

    def batch(self, batch_id: str) -> BatchRow | None:
        return self._run(lambda session: session.get(BatchRow, batch_id), write=False)

    def turns(self, conversation: str) -> list[BatchRow]:
        """The batches of a conversation, in the order they were recorded."""
        query = (
            select(BatchRow)
            .where(BatchRow.conversation == conversation)
            .order_by(BatchRow.created_at, BatchRow.id)
        )
        return self._run(lambda session: list(session.exec(query).all()), write=False)

    def last_turn(self, conversation: str) -> BatchRow | None:
        """The batch of a conversation recorded last."""
        return self._run(lambda session: snapshot.last_turn(session, conversation), write=False)

    def record(self, batch_id: str) -> BatchSnapshot | None:
        """The batch's row, calls, events, approvals and ends, read in one
        transaction; None if there is no such batch."""
        return self._run(lambda session: snapshot.record(session, batch_id), write=False)

    def rows_check(self, batch_id: str, key: bytes | None) -> dict[str, Any]:
        """The batch's rows against their hashes as written and the seal
        signed when it ended (`runtime/ledger/chain.py`)."""
        return self._read(chain.problems, batch_id, key)

    def conversation_head(self, conversation: str) -> Any:
        """The conversation's signed head (`runtime/ledger/turn_seal.py`), or None."""
        return self._read(turn_seal.head, conversation)

    def calls(self, batch_id: str) -> list[CallRow]:
        query = select(CallRow).where(CallRow.batch_id == batch_id).order_by(CallRow.position)
        return self._run(lambda session: list(session.exec(query).all()), write=False)

    def events(self, batch_id: str, call_id: str | None = None) -> list[EventRow]:
        query = select(EventRow).where(EventRow.batch_id == batch_id)
        if call_id is not None:
            query = query.where(EventRow.call_id == call_id)
        query = query.order_by(EventRow.id)
        return self._run(lambda session: list(session.exec(query).all()), write=False)

    def usage(
        self,
        by: usage.By,
        *,
        since: datetime | None = None,
        submitter: str | None = None,
    ) -> list[dict[str, Any]]:
        """Usage rolled up by `by` (docs/architecture.md, "Usage and budgets");
        `submitter`: that gateway key's or principal's only."""
        return self._read(usage.rollup, by, since=since, submitter=submitter)

    def usage_totals(self) -> list[dict[str, Any]]:
        """Every call's usage summed by tool, submitter and status."""
        return self._read(usage.totals)

    def batch_usage(self, batch_id: str) -> dict[str, Any]:
        """A batch's usage: its calls summed, and its model's tokens."""
        return self._read(usage.batch_total, batch_id)
