"""Ends announced on the result bus that the ledger still lacks after a
patience: written from the bus's copy (docs/architecture.md, "The ledger").

A worker publishes a read's end even while the ledger is locked: the row waits
in the pool process's buffer and lands when the ledger is back. A process
killed before that loses the row, though its end reached the caller, and the
batch stayed open in the ledger for good. The advancer sees such an end in
Redis and not in the ledger; once it has seen it so for `patience` seconds
(long past a live buffer's next try), it writes the announced end itself. The
ledger keeps an end's first write, so a buffered row landing after all
changes nothing.
"""

from __future__ import annotations

import logging
import threading
import time

from runtime.errors import LedgerRefused, LedgerUnavailable
from runtime.ledger.store import Ledger
from runtime.types import ToolResult

log = logging.getLogger("toolrun.batch")
PATIENCE = 10.0  # TOOLRUN_UNRECORDED_PATIENCE's default: seconds an end may lack its row
FORGET = 600.0  # seconds after which a sighting is dropped (its row landed meanwhile)


class UnrecordedEnds:
    def __init__(self, ledger: Ledger, *, patience: float = PATIENCE) -> None:
        self.ledger, self.patience = ledger, patience
        self._seen: dict[tuple[str, str], float] = {}  # (batch, call) -> first seen, monotonic
        self._lock = threading.Lock()

    def look(self, batch_id: str, announced: dict[str, ToolResult]) -> list[str]:
        """Note the ends Redis holds and the ledger lacks; write those seen so
        for `patience` seconds. The call ids written."""
        now = time.monotonic()
        with self._lock:
            due = [
                result
                for call_id, result in announced.items()
                if now - self._seen.setdefault((batch_id, call_id), now) >= self.patience
            ]
            if len(self._seen) > 1000:
                self._seen = {k: t for k, t in self._seen.items() if now - t < FORGET}
        written = []
        for result in due:
            try:
                first = self.ledger.record_result(batch_id, result)
            except (LedgerUnavailable, LedgerRefused) as error:
                log.warning(
                    "batch %s: %s: end not written yet: %s", batch_id, result.call_id, error
                )
                continue
            with self._lock:
                self._seen.pop((batch_id, result.call_id), None)
            if first:
                written.append(result.call_id)
                log.warning(
                    "batch %s: %s ended %s, announced but not in the ledger after %.0f s (the "
                    "row its worker kept was lost): written from the announced end",
                    batch_id,
                    result.call_id,
                    result.status.value,
                    self.patience,
                )
        return written
