"""Which batches and approvals a key may see (docs/architecture.md, "The HTTP
gateway"): its own batches, every batch for an admin key; approvals of any
batch in its roots for an approver key. A batch a key may not see is a 404,
as one that does not exist, so ids cannot be probed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.client.handle import BatchHandle
from runtime.gateway.keys import Key, Role
from runtime.gateway.problems import NotFound
from runtime.gateway.roles import within
from runtime.ledger.tables import BatchOwnerRow


@dataclass(frozen=True)
class Seen:
    handle: BatchHandle
    owner: BatchOwnerRow | None


def owner(gateway: Any, key: Key, batch_id: str) -> BatchOwnerRow | None:
    """The batch's owner row, if `key` may see the batch; else a 404."""
    found = gateway.keys.owner(batch_id)
    _check(key, found, batch_id)
    return found


def batch(gateway: Any, key: Key, batch_id: str) -> Seen:
    owner_row = owner(gateway, key, batch_id)
    handle = gateway.handles.get(batch_id)
    if handle is None:
        raise NotFound(f"no batch {batch_id!r}")
    return Seen(handle, owner_row)


def held(gateway: Any, key: Key, batch_id: str) -> Seen | None:
    """`batch` from what this process holds (the owner row remembered, the
    handle kept: a batch it submitted), without a read, so on the event loop
    with no thread hop; None if it holds either not, or a 404 as `batch`."""
    owner_row, handle = gateway.keys.remembered(batch_id), gateway.handles.held(batch_id)
    if owner_row is None or handle is None:
        return None
    _check(key, owner_row, batch_id)
    return Seen(handle, owner_row)


def _check(key: Key, found: BatchOwnerRow | None, batch_id: str) -> None:
    if key.role is not Role.admin and (found is None or found.key_id != key.id):
        raise NotFound(f"no batch {batch_id!r} for key {key.name!r}")


def approvals(gateway: Any, key: Key, rows: list) -> list:
    """The pending approvals `key` may see among `rows`."""
    if key.role is Role.admin:
        return rows
    if key.role is Role.approver:
        if key.roots is None:
            return rows
        places = {row.batch_id: _workspace(gateway, row.batch_id) for row in rows}
        return [
            row for row in rows if places[row.batch_id] and within(places[row.batch_id], key.roots)
        ]
    own = gateway.keys.owned(key.id, sorted({row.batch_id for row in rows}))
    return [row for row in rows if row.batch_id in own]


def _workspace(gateway: Any, batch_id: str) -> str | None:
    row = gateway.runtime.ledger.batch(batch_id)
    return row.workspace if row else None
