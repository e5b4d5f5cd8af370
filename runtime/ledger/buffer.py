"""Writes that could not reach the ledger, kept in order and replayed when it is
back, so an outage delays audit rows instead of dropping them.

Only writes whose calls may go on without the ledger come here: reads, and the
ends of calls that already ran. A side effect whose decision cannot be written
does not run (fail closed); that check happens before anything is buffered.
The buffer lives in the writing process's memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from runtime.errors import LedgerRefused, LedgerUnavailable

log = logging.getLogger("toolrun.ledger")


class LedgerBuffer:
    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self._pending: deque[Callable[[], object]] = deque()
        self._lock = threading.Lock()
        self._flusher: threading.Thread | None = None
        self._replay = threading.local()

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def replaying(self) -> bool:
        """Whether this thread runs a kept write now, after the ledger came back."""
        return getattr(self._replay, "on", False)

    def write(self, work: Callable[[], object]) -> bool:
        """Run `work` now, or keep it for later (after what is already kept, so
        rows land in the order they happened). True if it was written now.
        While nothing is kept, threads write side by side: the database orders
        them, and one slow commit holds up no other thread."""
        if not self._pending:
            try:
                work()
                return True
            except LedgerRefused as error:
                log.error("the ledger refused a row, which is lost: %s", error)
                return False
            except LedgerUnavailable as error:
                log.warning("ledger unavailable, buffering its rows: %s", error)
        self.keep(work)
        return False

    def keep(self, work: Callable[[], object]) -> None:
        """Keep `work` for later without trying it now (it has just failed)."""
        with self._lock:
            self._pending.append(work)
            self._start_flusher()

    def flush(self) -> bool:
        """Write what is kept, oldest first; False if the ledger is still down."""
        with self._lock:
            return self._flush()

    def _flush(self) -> bool:
        while self._pending:
            self._replay.on = True
            try:
                self._pending[0]()
            except LedgerRefused as error:
                log.error("the ledger refused a buffered row, which is lost: %s", error)
            except LedgerUnavailable:
                return False
            finally:
                self._replay.on = False
            self._pending.popleft()
        return True

    def _start_flusher(self) -> None:
        if self._flusher is None or not self._flusher.is_alive():
            self._flusher = threading.Thread(
                target=self._flush_until_empty, name="ledger-buffer", daemon=True
            )
            self._flusher.start()

    def _flush_until_empty(self) -> None:
        """Flush every `interval` until nothing is kept. It says it is done
        under the lock it flushed under: a row kept while it was still alive
        but past its last flush would otherwise wait for a next write that may
        never come (the soak found such ends, published and never written)."""
        while True:
            time.sleep(self.interval)
            with self._lock:
                if self._flush():
                    self._flusher = None  # a row kept from now on starts another
                    break
        log.info("ledger back: buffered rows written")
