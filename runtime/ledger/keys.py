"""The gateway's keys and which key submitted each batch, in the ledger
(docs/architecture.md, "The HTTP gateway"). Only hashes of secrets are stored;
minting and checking a token is `runtime.gateway.keys`'s job."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from sqlalchemy import ColumnElement, Table, update
from sqlalchemy import select as core_select
from sqlmodel import select

from runtime.errors import ConfigurationError, LedgerRefused
from runtime.ledger.rows import OWNERS, owner_insert
from runtime.ledger.store import Ledger
from runtime.ledger.tables import ApiKeyRow, BatchOwnerRow, utc_now

KEYS = ApiKeyRow.__table__


OWNERS_KEPT = 4096  # owner rows this process remembers: written once, they never change


class Keys:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._owners: OrderedDict[str, Any] = OrderedDict()  # batch id -> its owner row
        self._lock = threading.Lock()

    def add(self, row: ApiKeyRow) -> None:
        """Store a new key; a name in use (revoked or not) is refused, so a
        name in the ledger's approver column always means one key."""

        taken = select(ApiKeyRow.id).where(ApiKeyRow.name == row.name)

        def work(session) -> bool:
            if session.exec(taken).first() is not None:
                return False
            session.add(row)
            return True

        try:
            added = self.ledger.transaction(work)
        except LedgerRefused:  # the unique name, taken by a concurrent create
            added = False
        if not added:
            raise ConfigurationError(f"a key named {row.name!r} exists already")

    def get(self, key_id: str) -> ApiKeyRow | None:
        """The key's row (its columns, read as one SQL statement: every request
        of the gateway asks, docs/architecture.md, "Round trips and memory")."""
        return self._one(KEYS, KEYS.c.id == key_id)

    def all(self) -> list[ApiKeyRow]:
        query = select(ApiKeyRow).order_by(ApiKeyRow.created_at)
        return self.ledger.transaction(lambda s: list(s.exec(query).all()), write=False)

    def revoke(self, name: str) -> bool:
        """False if no live key has that name."""
        statement = (
            update(ApiKeyRow)
            .where(ApiKeyRow.name == name, ApiKeyRow.revoked_at.is_(None))
            .values(revoked_at=utc_now())
        )
        return self.ledger.transaction(lambda s: s.exec(statement).rowcount == 1)

    def own(
        self,
        batch_id: str,
        *,
        key_id: str,
        key_name: str,
        format: str | None,
        written: bool = False,
    ) -> None:
        """Record the submitter of a batch, once: a repeated submit (the same
        idempotency key) keeps the first record. `written`: the row went with
        the batch's record (`Ledger.record_batch(owner=...)`): only remember it."""
        row = {
            "batch_id": batch_id,
            "key_id": key_id,
            "key_name": key_name,
            "format": format,
            "at": utc_now(),
        }

        def work(connection) -> bool:
            return connection.execute(owner_insert(connection.dialect.name), row).rowcount == 1

        # This row is the one (written now, or with the record): the poll that
        # follows needs no read.
        if written or self.ledger.transaction(work, core=True):
            self._remember(batch_id, BatchOwnerRow(**row))

    def owner(self, batch_id: str) -> BatchOwnerRow | None:
        """The batch's owner row; one found is remembered (it never changes)."""
        with self._lock:
            known = self._owners.get(batch_id)
        if known is not None:
            return known
        found = self._one(OWNERS, OWNERS.c.batch_id == batch_id)
        if found is not None:
            self._remember(batch_id, found)
        return found

    def remembered(self, batch_id: str) -> BatchOwnerRow | None:
        """The batch's owner row if this process has it, without a read."""
        with self._lock:
            return self._owners.get(batch_id)

    def _remember(self, batch_id: str, row: Any) -> None:
        with self._lock:
            self._owners[batch_id] = row
            while len(self._owners) > OWNERS_KEPT:
                self._owners.popitem(last=False)

    def _one(self, table: Table, where: ColumnElement[bool]) -> Any:
        """One row's columns, with attribute access as on the table's model,
        without an ORM session's bookkeeping; None if there is none."""
        query = core_select(table).where(where)
        return self.ledger.transaction(
            lambda connection: connection.execute(query).first(), write=False, core=True
        )

    def owned(self, key_id: str, batch_ids: list[str]) -> set[str]:
        """Those of `batch_ids` that `key_id` submitted."""
        query = select(BatchOwnerRow.batch_id).where(
            BatchOwnerRow.key_id == key_id, BatchOwnerRow.batch_id.in_(batch_ids)
        )
        return set(self.ledger.transaction(lambda s: list(s.exec(query).all()), write=False))
