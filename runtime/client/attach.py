"""`Runtime.attach`: a handle on a batch submitted from any process, alive or
not, built from its ledger rows (or, while the ledger was away at its submit,
from the record its submitter kept in Redis: docs/architecture.md, "The
ledger")."""

from __future__ import annotations

import time
from typing import Any

from runtime.batch import liveness
from runtime.client.fingerprint import check_key
from runtime.client.follower import Follower
from runtime.client.handle import BatchHandle
from runtime.client.run import BatchRun, Services
from runtime.errors import InvalidBatch, LedgerUnavailable, StateUnavailable
from runtime.gate.policy import Policy
from runtime.ledger.batch_record import BatchRecord
from runtime.ledger.store import Ledger
from runtime.ledger.tables import BatchRow
from runtime.types import Batch, Mode, ToolCall

ATTACH_SECONDS = 30.0  # how long `attach` waits for a kept record to land in the ledger


def attached(follower: Follower, services: Services, ledger: Ledger, batch_id: str) -> BatchHandle:
    """The results that have ended, then those still to come."""
    following = next((r for r in follower.open_runs() if r.batch.id == batch_id), None)
    if following is not None:  # this process follows it already
        return BatchHandle(following)
    row = ledger.batch(batch_id) or landed(services, ledger, batch_id)
    if row is None:
        raise InvalidBatch(f"no batch {batch_id!r} in the ledger")
    calls = [
        ToolCall(id=c.call_id, name=c.tool, arguments=c.arguments) for c in ledger.calls(batch_id)
    ]
    batch = Batch(
        id=batch_id,
        calls=calls,
        mode=Mode(row.mode),
        workspace=row.workspace,
        on_error=row.on_error,
    )
    run = BatchRun(batch, services)
    run.attach()
    follower.follow(run)
    return BatchHandle(run)


def known_row(ledger: Ledger, batch_id: str) -> BatchRow | None:
    """A keyed batch's row; None with the ledger away too: then the record
    kept in Redis is the key's compare-and-set."""
    try:
        return ledger.batch(batch_id)
    except LedgerUnavailable:
        return None


def lost_race(
    follower: Follower, services: Services, batch: Batch, policy: Policy, key: str
) -> BatchHandle:
    """The handle of a submit that lost the race for `key`: the batch the
    winner recorded, or kept in Redis with the ledger away; `KeyConflict`
    if that is another batch."""
    ledger = services.approvals.ledger
    row = known_row(ledger, batch.id)
    if row is None:
        return kept(follower, services, batch, policy, key)
    check_key(row, batch, policy, key)
    return attached(follower, services, ledger, batch.id)


def kept(
    follower: Follower, services: Services, batch: Batch, policy: Policy, key: str
) -> BatchHandle:
    """A handle on the batch another submitter of `key` kept in Redis while
    the ledger was away, if it is `batch` (else `KeyConflict`): the ends its
    record holds, then those published (docs/architecture.md, "Attach and
    keys")."""
    text = services.transport.kept_record(batch.id)
    if text is None:  # landed and dropped since: the ledger has it now
        row = services.approvals.ledger.batch(batch.id)
        if row is None:
            raise InvalidBatch(f"no batch {batch.id!r} in the ledger")
        check_key(row, batch, policy, key)
        return attached(follower, services, services.approvals.ledger, batch.id)
    record = BatchRecord.loads(text)
    check_key(record.row(), batch, policy, key)
    run = BatchRun(record.batch, services)
    run.follow_kept(record)
    follower.follow(run)
    return BatchHandle(run)


def landed(services: Services, ledger: Ledger, batch_id: str) -> Any:
    """The batch's row once the record its submitter kept in Redis has
    landed, written here as the sweep would; None if no record of it is
    kept, or it has not landed within `ATTACH_SECONDS`."""
    state = services.transport
    until = time.monotonic() + ATTACH_SECONDS
    while True:
        try:
            if batch_id not in state.kept_records():
                return ledger.batch(batch_id)  # landed meanwhile, or never kept
        except StateUnavailable:
            return None
        liveness.record_kept(state, ledger)
        if (row := ledger.batch(batch_id)) is not None or time.monotonic() > until:
            return row
        time.sleep(0.5)
