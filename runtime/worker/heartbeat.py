"""The worker's heartbeat: a thread of its main process that renews, every
quarter of a lease, the leases of the claimed calls its pool is running and
the sweep's lease while it sweeps (`Worker.beat`). It runs beside the pool,
not in it, so a tool stuck in C code or a stopped pool process does not stop
it; the process's death does, and the cluster learns of it when the leases
lapse (docs/architecture.md, "Leases")."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from runtime.worker.worker import Worker

log = logging.getLogger("toolrun.worker")
# Seconds between tries while renewing fails (Redis restarting): renewed as
# soon as it is back, before the running calls' fences stop them ("Leases").
RETRY = 0.25


def start_heartbeat(
    worker: Callable[[], Worker],
    running: Callable[[], list[Any]],
    interval: float,
    *,
    stop: threading.Event | None = None,
) -> threading.Thread:
    """A daemon thread calling `worker().beat(running())` every `interval`
    seconds until `stop` is set (`running`: the task messages in progress);
    after a failed beat, every `RETRY` seconds until one succeeds."""
    stop = stop or threading.Event()

    def loop() -> None:
        wait = interval
        while not stop.wait(wait):
            try:
                worker().beat(running())
                wait = interval
            except Exception as error:  # noqa: BLE001 - the state away: the next beat
                log.warning("heartbeat failed: %s", error)
                wait = min(interval, RETRY)

    thread = threading.Thread(target=loop, name="toolrun-heartbeat", daemon=True)
    thread.start()
    return thread
