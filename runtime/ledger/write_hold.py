"""The write hold: no ledger transaction of a process is open while a tool runs in it.

In a pool process the tool runs on the main thread, and C code it calls can
hold the GIL until the process is killed at its hard limit; a transaction
another thread of that process had open (the buffer's flusher replaying rows
after an outage) would keep the ledger locked for everyone until then. While
`quiet()` is held, other threads' ledger writes wait to begin, and `quiet()`
itself waits for writes under way to end; the thread holding it still writes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class WriteHold:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._writers = 0
        self._quiet_by: int | None = None  # the thread running a tool

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """While a tool runs on this thread (one at a time per process)."""
        with self._changed:
            while self._writers or self._quiet_by is not None:
                self._changed.wait()
            self._quiet_by = threading.get_ident()
        try:
            yield
        finally:
            with self._changed:
                self._quiet_by = None
                self._changed.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around one write transaction."""
        me = threading.get_ident()
        with self._changed:
            while self._quiet_by not in (None, me):
                self._changed.wait()
            self._writers += 1
        try:
            yield
        finally:
            with self._changed:
                self._writers -= 1
                self._changed.notify_all()
