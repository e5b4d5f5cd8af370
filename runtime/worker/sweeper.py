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
    after: Callable[[], object] | None = None,
) -> threading.Thread:
    """A daemon thread offering `worker()`'s sweep every `interval` seconds
    until `stop` is set; `after` runs after each sweep this holder made (the
    Celery binding's dead letters)."""
    stop = stop or threading.Event()
    holder = holder or sweep_holder()

    def loop() -> None:
        while not stop.wait(interval):
            try:
                if worker().sweep(holder) and after is not None:
                    after()
            except Exception as error:  # noqa: BLE001 - the state or the ledger away: next time
                log.warning("sweep failed: %s", error)

    thread = threading.Thread(target=loop, name="toolrun-sweep", daemon=True)
    thread.start()
    return thread
