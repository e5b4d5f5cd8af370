"""What the in-process transport keeps of a batch beside the ledger: its
plan's copy and its record until the ledger has it, as Redis does for the
cluster (runtime/transport/copies.py)."""

from __future__ import annotations

import json
import threading
from typing import Any

from runtime.transport.base import PlanCopy
from runtime.transport.memory_leases import MemoryLeases


class MemoryCopies(MemoryLeases):
    def __init__(self) -> None:
        super().__init__()
        self._copying = threading.Lock()
        self._plans: dict[str, dict[str, Any]] = {}
        self._records: dict[str, str] = {}

    def keep_plan(self, batch_id: str, plan: PlanCopy) -> None:
        self._plans[batch_id] = json.loads(plan) if isinstance(plan, str) else plan

    def plan(self, batch_id: str) -> dict[str, Any] | None:
        return self._plans.get(batch_id)

    def drop_plan(self, batch_id: str) -> None:
        self._plans.pop(batch_id, None)

    def keep_record(self, batch_id: str, record: str | bytes, *, patience: float = 0.0) -> bool:
        if isinstance(record, bytes):
            record = record.decode()
        with self._copying:
            return self._records.setdefault(batch_id, record) == record

    def kept_record(self, batch_id: str) -> str | None:
        with self._copying:
            return self._records.get(batch_id)

    def kept_records(self) -> dict[str, str]:
        with self._copying:
            return dict(self._records)

    def drop_record(self, batch_id: str, *, later: bool = False, plan: bool = False) -> None:
        with self._copying:
            self._records.pop(batch_id, None)
            if plan:
                self._plans.pop(batch_id, None)
