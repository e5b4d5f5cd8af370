"""The sweep's loop: every worker offers to sweep every `interval` seconds, and
the one that holds the sweep's lease does (`Worker.sweep`): deadlines, expired
approvals, messages lost with the state (docs/architecture.md, "The sweep")."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable

from runtime.worker.worker import Worker

log = logging.getLogger("toolrun.worker")


def sweep_holder() -> str:
    """This process's name as the sweep's holder: host, pid and a nonce (an
    operator can tell which process sweeps; a reused pid is another holder)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def start_sweeping(
    worker: Callable[[], Worker],
    interval: float,
    *,
    stop: threading.Event | None = None,
    holder: str | None = None,
    first: Callable[[], object] | None = None,
) -> threading.Thread:
    """A daemon thread offering `worker()`'s sweep every `interval` seconds
    until `stop` is set; `first` runs at the start of each sweep this holder
    makes (the Celery binding's dead letters: a call the broker gave up on
    ends as such before the sweep would send it again)."""
    stop = stop or threading.Event()
    holder = holder or sweep_holder()

    def loop() -> None:
        while not stop.wait(interval):
            try:
                worker().sweep(holder, first=first)
            except Exception as error:  # noqa: BLE001 - the state or the ledger away: next time
                log.warning("sweep failed: %s", error)

    thread = threading.Thread(target=loop, name="toolrun-sweep", daemon=True)
    thread.start()
    return thread
