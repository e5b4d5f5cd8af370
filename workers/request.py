"""The worker's side of a call's hard time limit (`runtime.execution.time_limits`).

Celery's prefork pool kills a pool process whose task passes its hard time
limit and starts another in its place. This request class sets that limit
from the tool the message names, and when it passes, makes sure the process
is gone before the call ends: only then may the next ordered step start
(docs/architecture.md, "Stopping a call"). The call's end is recorded and
published from the worker's main process, since the pool process is dead.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from celery.worker.request import Request

from runtime.stack.processes import is_alive

DEATH_PATIENCE = 5.0  # seconds a SIGKILLed pool process may take to be gone


class CallRequest(Request):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from workers import tasks  # loaded by now: this class is named by its task

        message = self._args[0] if self._args else None
        self.time_limits = (tasks.worker().hard_limit(message), None)

    def on_timeout(self, soft: bool, timeout: float) -> None:
        if soft:
            return super().on_timeout(soft, timeout)
        if self.worker_pid:
            _kill(self.worker_pid)
        super().on_timeout(soft, timeout)
        if self._args:
            from workers import tasks

            threading.Thread(
                target=tasks.worker().end_killed,
                args=(self._args[0], timeout),
                kwargs={"name": self.hostname},
                name="killed-call",
                daemon=True,
            ).start()


def _kill(pid: int) -> None:
    """SIGKILL a pool process and wait until it is gone (a zombie counts as gone)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + DEATH_PATIENCE
    while is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
