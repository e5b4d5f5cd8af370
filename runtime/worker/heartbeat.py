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


def start_heartbeat(
    worker: Callable[[], Worker],
    running: Callable[[], list[Any]],
    interval: float,
    *,
    stop: threading.Event | None = None,
) -> threading.Thread:
    """A daemon thread calling `worker().beat(running())` every `interval`
    seconds until `stop` is set (`running`: the task messages in progress)."""
    stop = stop or threading.Event()

    def loop() -> None:
        while not stop.wait(interval):
            try:
                worker().beat(running())
            except Exception as error:  # noqa: BLE001 - the state away: the next beat
                log.warning("heartbeat failed: %s", error)

    thread = threading.Thread(target=loop, name="toolrun-heartbeat", daemon=True)
    thread.start()
    return thread
