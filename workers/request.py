"""The worker's side of a call's hard time limit (`runtime.execution.time_limits`),
and of a pool process that dies mid-call.

Celery's prefork pool kills a pool process whose task passes its hard time
limit and starts another in its place. This request class sets that limit
from the tool the message names, and when it passes, makes sure the process
is gone before the call ends: only then may the next ordered step start
(docs/architecture.md, "Stopping a call"). A pool process killed by anyone
else (or crashed) reaches `on_failure` with `WorkerLostError`. Either way the
sessions that process started (a shell's bash, an MCP stdio server:
`runtime.sessions`) are killed, and gone, first; then the call's end is
recorded and published from the worker's main process, since the pool process
is dead (a lost read or idempotent call is delivered again instead).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

from billiard.einfo import ExceptionWithTraceback
from billiard.exceptions import WorkerLostError
from celery.worker.request import Request

from runtime import sessions
from runtime.stack.processes import is_alive

log = logging.getLogger("toolrun.worker")
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
            sessions.end_left_by(self.worker_pid)
        super().on_timeout(soft, timeout)
        self._end(timeout, lost=False)

    def on_failure(self, exc_info, send_failed_event: bool = True, return_ok: bool = False):
        """A pool process lost mid-call: its sessions go before its message is
        requeued (a redelivered copy must not run beside them), then its end."""
        error = exc_info.exception
        error = error.exc if isinstance(error, ExceptionWithTraceback) else error
        if isinstance(error, WorkerLostError) and self.worker_pid:
            sessions.end_left_by(self.worker_pid)
            self._end(0.0, lost=True)
        return super().on_failure(
            exc_info, send_failed_event=send_failed_event, return_ok=return_ok
        )

    def _end(self, limit: float, *, lost: bool) -> None:
        """End the call on a thread, once the sessions of its process are gone
        (SIGKILL takes effect at once, unless a process is stuck in the kernel:
        then this waits as long as it takes)."""
        if not self._args:
            return
        from workers import tasks

        pid, raw, name = self.worker_pid, self._args[0], self.hostname

        def end() -> None:
            while pid and not sessions.end_left_by(pid):
                log.error("sessions started by pool process %s survive SIGKILL; waiting", pid)
            tasks.worker().end_killed(raw, limit, name=name, lost=lost)

        threading.Thread(target=end, name="killed-call", daemon=True).start()


def _kill(pid: int) -> None:
    """SIGKILL a pool process and wait until it is gone (a zombie counts as gone)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + DEATH_PATIENCE
    while is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
