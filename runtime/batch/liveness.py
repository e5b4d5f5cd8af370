"""Whether the workers of a batch's calls are alive, as the advancer judges it
from leases (docs/architecture.md, "Leases"), and the batch records kept
while the ledger was away. Helpers of `runtime.batch.advance`."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from runtime import sessions
from runtime.batch.plan import BatchPlan
from runtime.errors import LedgerRefused, LedgerUnavailable, StateUnavailable
from runtime.ledger.batch_record import BatchRecord
from runtime.ledger.store import Ledger, Recorded
from runtime.registry.capabilities import Registry
from runtime.transport.base import Copies, Known, Leases
from runtime.types import Risk

log = logging.getLogger("toolrun.batch")


def claims(registry: Registry, plan: BatchPlan, call_id: str) -> bool:
    """Whether a call of the plan runs only under a claim (a side effect
    that is not idempotent), so a lost worker's call ends, not runs again."""
    planned = plan.calls.get(call_id)
    spec = registry.get(planned.tool) if planned is not None else None
    return spec is not None and spec.risk is not Risk.read and not spec.idempotent


def gone(
    state: Leases,
    batch_id: str,
    held: Known | None,
    claimed: Iterable[str],
    taken: set[str],
    lease_seconds: float,
) -> tuple[frozenset[str], frozenset[str]]:
    """The calls whose worker is gone: claimed ones (lost: they end) and
    others a worker took (stalled: they run again). A lease ran out (`held`:
    the leases the state holds, with the seconds each has left); or a claimed
    call has none and has had none for a lease's time (its holder takes the
    lease right after the claim, and after a restart of the state renews it).
    Every time here is the state's: hosts' clocks need not agree
    (docs/architecture.md, "Leases"). With the state away (`held` None), none."""
    if held is None:
        return frozenset(), frozenset()
    holds, claimed = held.holds, list(claimed)
    try:
        unheld = state.unheld(batch_id, [c for c in claimed if c not in holds])
    except StateUnavailable:
        return frozenset(), frozenset()

    def lapsed(call_id: str) -> bool:
        if call_id in holds:
            return holds[call_id] <= 0
        return unheld.get(call_id, 0.0) >= lease_seconds

    lost = frozenset(c for c in claimed if lapsed(c))
    stalled = frozenset(c for c in taken if c in holds and lapsed(c))
    return lost, stalled


def orphans_gone(lost: frozenset[str]) -> bool:
    """Before calls judged lost end and the batch goes on: the command
    sessions their dead pool processes left on this host are killed (and
    waited for), as a worker that starts kills them, so the next step never
    overlaps them. False if one outlived its SIGKILL. What another host left
    is killed there, when a worker starts on it (docs/architecture.md,
    "Leases")."""
    if not lost:
        return True
    gone = sessions.end_orphans()
    if not gone:
        log.error("calls %s were judged lost; a session they left is still running", sorted(lost))
    return gone


def lapsed(state: Leases) -> set[tuple[str, str]]:
    """(batch id, call id) of every lease run out now; none with the state away."""
    try:
        return state.lapsed()
    except StateUnavailable:
        return set()


def record_kept(state: Copies, ledger: Ledger) -> None:
    """Write the batch records kept while the ledger was away (their
    submitters may be gone); the ledger's compare-and-set makes a record
    its submitter wrote meanwhile a no-op (docs/architecture.md, "The
    ledger")."""
    try:
        kept = state.kept_records()
    except StateUnavailable:
        return
    for batch_id, text in kept.items():
        try:
            if BatchRecord.loads(text).write(ledger) is Recorded.ended:
                state.drop_plan(batch_id)  # its calls had ended: so has the batch
        except LedgerRefused as error:  # it can never land
            log.error("batch %s: its kept record was refused: %s", batch_id, error)
        except LedgerUnavailable:
            return  # still away: the next sweep
        except (ValueError, KeyError, TypeError) as error:
            log.error("batch %s: its kept record is unreadable: %s", batch_id, error)
        state.drop_record(batch_id)
