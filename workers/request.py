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

A chain runs in one task (docs/architecture.md, "A chain in one task"): its
task's limit is the sum of its steps' (a backstop), and each step gets its
own from the watchdog, which reads on the live board (`runtime.worker.board`)
which step each pool process runs and since when, and takes a step past its
hard limit down the same path as Celery's own limit. A killed or lost chain
ends the step it was running; the steps after it are the cluster's.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

from billiard.einfo import ExceptionWithTraceback
from billiard.exceptions import WorkerLostError
from celery.worker import state
from celery.worker.request import Request
from kombu.asynchronous import get_event_loop

from runtime import sessions
from runtime.stack.processes import is_alive
from runtime.transport import chain
from runtime.worker import orphans
from runtime.worker.board import Step, tag_of

log = logging.getLogger("toolrun.worker")
DEATH_PATIENCE = 5.0  # seconds a SIGKILLed pool process may take to be gone
WATCH_SECONDS = 0.1  # how often the watchdog looks at the chain steps running
SHOWN_OK = "{'status': 'ok'"  # how the repr of a call that ended ok starts (tasks.Shown)


class CallRequest(Request):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from workers import tasks  # loaded by now: this class is named by its task

        self.raw = self._args[0] if self._args else None
        self.steps = chain.length(self.raw)
        self.time_limits = (tasks.worker().hard_limit(self.raw), None)
        self._step: Step | None = None  # the chain step last seen running
        if self.steps > 1 and _watchdog:  # built on the event loop, as the message comes
            _watchdog[0].arm()

    def step(self) -> tuple[int, Any]:
        """The index and message (carrying the steps after it) of the step
        this request's pool process runs, as the live board says."""
        if self.steps > 1 and self.worker_pid:
            from workers import tasks

            board = tasks.board()
            found = board.step(self.worker_pid, tag_of(self.id)) if board else None
            self._step = found or self._step
        index = self._step.index if self._step else 0
        return index, chain.step_of(self.raw, index)

    def overdue(self, now: float) -> bool:
        """Whether the chain step running has passed its own hard limit."""
        if self.steps <= 1 or not self.worker_pid:
            return False
        from workers import tasks

        index, message = self.step()
        if self._step is None or message is None:
            return False
        return now - self._step.started >= tasks.worker().hard_limit(message, alone=True)

    def on_timeout(self, soft: bool, timeout: float) -> None:
        if soft:
            return super().on_timeout(soft, timeout)
        from workers import tasks

        _, message = self.step()  # read before the kill: the board keeps it, but say so
        limit = tasks.worker().hard_limit(message, alone=True) if self.steps > 1 else timeout
        if self.worker_pid:
            _kill(self.worker_pid)
            sessions.end_left_by(self.worker_pid)
        super().on_timeout(soft, limit)
        self._end(limit, message, lost=False)

    def send_event(self, type: str, **fields: Any) -> None:
        """A task whose call did not end `ok` (an error, a timeout, a denial) is sent
        to Flower as failed, its summary as the exception, so an operator scanning
        Flower's failures finds it (docs/architecture.md, "What Flower shows").
        Only the event changes: the task returned, and is acknowledged, as before."""
        if type == "task-succeeded" and not str(fields.get("result")).startswith(SHOWN_OK):
            type = "task-failed"
            fields = {"exception": fields.get("result"), "traceback": ""}
        super().send_event(type, **fields)

    def on_failure(self, exc_info, send_failed_event: bool = True, return_ok: bool = False):
        """A pool process lost mid-call: its sessions go before its message is
        requeued (a redelivered copy must not run beside them), then its end."""
        error = exc_info.exception
        error = error.exc if isinstance(error, ExceptionWithTraceback) else error
        if isinstance(error, WorkerLostError) and self.worker_pid:
            _, message = self.step()
            sessions.end_left_by(self.worker_pid)
            self._end(0.0, message, lost=True)
        return super().on_failure(
            exc_info, send_failed_event=send_failed_event, return_ok=return_ok
        )

    def _end(self, limit: float, raw: Any, *, lost: bool) -> None:
        """End the call (`raw`: a chain's step that was running) on a thread,
        once the sessions of its process are gone (SIGKILL takes effect at
        once, unless a process is stuck in the kernel: then this waits as long
        as it takes)."""
        if raw is None:
            return
        from workers import tasks

        pid, name = self.worker_pid, self.hostname

        def end() -> None:
            while pid and not sessions.end_left_by(pid):
                log.error("sessions started by pool process %s survive SIGKILL; waiting", pid)
            orphans.end_killed(tasks.worker(), raw, limit, name=name, lost=lost)

        threading.Thread(target=end, name="killed-call", daemon=True).start()


def watch_chains(pool: Any, every: float = WATCH_SECONDS) -> None:
    """From the worker's main process, on its event loop: while a chain is
    reserved, every `every` seconds, give a chain step past its hard limit
    the treatment of Celery's own hard limit (`pool`: the worker's
    `TaskPool`; its process is killed, the step ends, the task is
    acknowledged). Without an event loop (a pool other than prefork) chains
    keep their task's limit alone."""
    hub = get_event_loop()
    if hub is None or not hasattr(pool, "_pool"):
        log.warning("no event loop: chain steps keep their task's time limit alone")
        return
    _watchdog[:] = [Watchdog(hub, pool, every)]
    if _chains():  # reserved before the worker was ready
        _watchdog[0].arm()


class Watchdog:
    """The chain steps' own hard limits, looked at on the event loop only
    while a chain is reserved: an idle worker's main process wakes for
    nothing (ten times a second before, about a third of its idle CPU; the
    loop that hands each message to the pool is the one it woke)."""

    def __init__(self, hub: Any, pool: Any, every: float) -> None:
        self.hub, self.pool, self.every = hub, pool, every
        self.armed = False

    def arm(self) -> None:
        """Look again in `every` seconds (once, however often it is armed)."""
        if not self.armed:
            self.armed = True
            self.hub.call_later(self.every, self.tick)

    def tick(self) -> None:
        self.armed = False
        chains = _chains()
        now = time.monotonic()
        for request in chains:
            try:
                job = request._apply_result() if request._apply_result else None
                if job is not None and not job.ready() and request.overdue(now):
                    self.pool._pool.on_hard_timeout(job)
            except Exception:  # noqa: BLE001 - the next tick looks again
                log.exception("the chain watchdog failed on %s", request.id)
        if chains:
            self.arm()


_watchdog: list[Watchdog] = []  # the main process's, once its worker is ready


def _chains() -> list[CallRequest]:
    """The chains this worker has reserved (running ones among them) and not finished."""
    return [r for r in list(state.reserved_requests) if isinstance(r, CallRequest) and r.steps > 1]


def _kill(pid: int) -> None:
    """SIGKILL a pool process and wait until it is gone (a zombie counts as gone)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + DEATH_PATIENCE
    while is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
