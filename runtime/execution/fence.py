"""The fence around a claimed call (docs/architecture.md, "Leases"): while a
side effect runs in a worker's pool process, a thread of that process reads
how long its lease has left, on Redis's clock, as the advancer would judge
it. The main process renews the lease every quarter of it; if the lease runs
down to its last quarter (the renew deadline: two renewals missed and a third
late), or this process cannot confirm it for that long, the process kills the
command sessions its call started and then itself, before the lease lapses
and the call is judged lost. So a call judged lost is no longer running when
the batch's next step starts, whichever host it ran on."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from runtime import sessions
from runtime.transport.base import Leases

log = logging.getLogger("toolrun.worker")
DEADLINE = 0.25  # of a lease: stop once no more than this is left
LOOK = 1 / 12  # of a lease: how often the lease is read


@contextmanager
def fenced(state: Leases | None, batch_id: str, call_id: str, lease: float) -> Iterator[None]:
    """Run the body under the fence. Only a worker's pool process fences (it
    records its sessions: `sessions.recording`); elsewhere nobody judges a
    thread lost, so this does nothing."""
    if state is None or not sessions.recording():
        yield
        return
    done = threading.Event()
    watch = threading.Thread(
        target=_watch,
        args=(state, batch_id, call_id, lease, done),
        name=f"toolrun-fence-{call_id}",
        daemon=True,
    )
    watch.start()
    try:
        yield
    finally:
        done.set()


def _watch(state: Leases, batch_id: str, call_id: str, lease: float, done: threading.Event) -> None:
    """Until `done`: read the lease's seconds left every `LOOK` of a lease;
    with the state away, count down from the last reading on this host's
    monotonic clock. At the renew deadline, stop the call."""
    until = time.monotonic() + lease  # its lease was just taken or carried on
    while not done.wait(lease * LOOK):
        asked = time.monotonic()
        try:
            until = asked + state.left(batch_id, call_id, lease)
        except Exception as error:  # noqa: BLE001 - unconfirmed: counted down, never unfenced
            log.warning("cannot read the lease of %s: %s", call_id, error)
        if until - time.monotonic() > lease * DEADLINE or done.is_set():
            continue
        log.error(
            "%s: its lease could not be renewed before its renew deadline; "
            "the call stops here (its process and sessions are killed)",
            call_id,
        )
        # No wait between the two kills: a thread of this process that saw its
        # command die could otherwise record an end for a call already stopped.
        sessions.kill_own()
        os.kill(os.getpid(), signal.SIGKILL)
