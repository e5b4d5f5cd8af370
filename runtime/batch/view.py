"""What moving a batch on starts from: one read of the transport's state and
one of the ledger, made one `View` (runtime/batch/progress.py), or, with the
ledger away, what Redis holds (docs/architecture.md, "A batch the cluster
owns")."""

from __future__ import annotations

import logging

from runtime import clock
from runtime.batch import liveness
from runtime.batch.approving import Approving
from runtime.batch.plan import BatchPlan
from runtime.batch.progress import View
from runtime.batch.unrecorded import UnrecordedEnds
from runtime.errors import LedgerUnavailable, StateUnavailable
from runtime.ledger.batches import Progress
from runtime.ledger.store import Ledger
from runtime.registry.capabilities import Registry
from runtime.results import endings
from runtime.transport.base import BatchState, Known

log = logging.getLogger("toolrun.batch")
CLOSED_BY = "close"  # who cancelled a batch whose Runtime was closed


class Viewer:
    def __init__(
        self,
        *,
        ledger: Ledger,
        registry: Registry,
        state: BatchState,
        unrecorded: UnrecordedEnds,
        approving: Approving,
        lease_seconds: float,
        resend_after: float,
    ) -> None:
        self.ledger, self.registry, self.state = ledger, registry, state
        self.unrecorded, self.approving = unrecorded, approving
        self.lease_seconds, self.resend_after = lease_seconds, resend_after

    def view(self, plan: BatchPlan, expire: bool, found: Progress | None = None) -> View:
        try:
            return self._read(plan, expire, found)
        except LedgerUnavailable as error:
            # Without the ledger, what Redis holds: ends announced (the buffered rows
            # land later), marks of what was sent. Side effects fail closed at the
            # worker, whose claim needs the ledger; reads go on.
            log.warning(
                "batch %s: ledger unavailable, going on from Redis: %s", plan.batch.id, error
            )
            now = max(clock.now(), plan.deadline) if expire else clock.now()
            held = self.state.known(plan.batch.id, [])
            return View(
                ends=held.ends,
                sent=held.sent,
                started=held.started,
                approvals={},
                cancelled_at=clock.now() if held.cancelled else None,
                now=now,
            )

    def _read(self, plan: BatchPlan, expire: bool, found: Progress | None) -> View:
        """The view from one read of the state and one of the ledger (`found`,
        if the caller has read it already)."""
        batch_id = plan.batch.id
        try:
            held: Known | None = self.state.known(batch_id, list(plan.calls))
        except StateUnavailable as error:  # what it held is unknown, the ledger still counts
            log.warning("batch %s: %s", batch_id, error)
            held = None
        found = found or self.ledger.progress(batch_id)
        cancelled = found.cancelled_at.timestamp() if found.cancelled_at else None
        if cancelled is None and held is not None and held.cancelled:
            cancelled = self.ledger.mark_cancelled(batch_id, by="flag").timestamp()
        now = max(clock.now(), plan.deadline) if expire else clock.now()
        closed = found.cancelled_by == CLOSED_BY
        # Ends announced but not yet in the ledger (rows waiting in a worker's buffer
        # while the ledger was locked) count too; the ledger's own wins over them.
        ends = {**(held.ends if held else {}), **found.ends}
        if held is not None and len(ends) > len(found.ends):
            announced = {c: r for c, r in held.ends.items() if c not in found.ends}
            for call_id in self.unrecorded.look(batch_id, announced):
                found.ends[call_id] = ends[call_id]  # written now: the batch may be marked ended
        running = found.claimed  # a redelivered read shows running too
        claimed = {c for c in running if liveness.claims(self.registry, plan, c)}
        started = held.started if held else set()
        taken = started - claimed - ends.keys()  # reads and idempotent calls running
        lost, stalled = liveness.gone(
            self.state, batch_id, held, claimed, taken, self.lease_seconds
        )
        return View(
            ends=ends,
            sent=held.sent if held else {},
            started=started | set(running),
            approvals=self.approving.answers(plan, now),
            cancelled_at=cancelled,
            now=now,
            cause="the runtime was closed" if closed else endings.CANCELLED,
            lost=lost,
            stalled=stalled,
            resend_after=self.resend_after,
        )
