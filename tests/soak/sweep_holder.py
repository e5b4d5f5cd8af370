"""The fault `kill sweep holder`: SIGKILL the worker holding the sweep's lock,
mid sweep, and time how long the lock names it after its death: nobody
sweeps (deadlines, lost messages) until another worker holds it. A dead
holder must be noticed within GAP_LIMIT seconds (docs/architecture.md,
"The sweep")."""

from __future__ import annotations

import time

from tests.soak.tally import Tally

FIND_PATIENCE = (
    10.0  # seconds to wait for a sweep to hold the lock (every worker offers each second)
)
GAP_LIMIT = 10.0  # seconds a dead holder may keep the lock: "noticed within a few seconds"
GAP_WATCH = 90.0  # seconds the soak watches a stranded lock before it counts it as never let go


def kill_sweep_holder(stack, tally: Tally) -> None:
    """Wait until a worker of the stack holds the lock, SIGKILL it, and watch
    the lock on a thread of its own."""
    give_up = time.monotonic() + FIND_PATIENCE
    while (held := stack.sweep_holder()) is None or held[1] is None:
        if time.monotonic() > give_up:
            raise RuntimeError(f"no worker of the stack held the sweep's lock ({held})")
        time.sleep(0.002)  # a sweep holds it for milliseconds: look often
    holder, worker = held
    stack.kill_worker(worker)
    killed = time.monotonic()
    held = stack.sweep_holder()
    if held is None or held[0] != holder:  # its sweep was over before the kill landed
        with tally.lock:
            tally.figures["sweep holders killed after their sweep"] += 1
        return
    tally.spawn(watch, stack, tally, holder, killed)


def watch(stack, tally: Tally, holder: str, killed: float) -> None:
    """Seconds from the kill until the lock no longer names the dead holder."""
    while time.monotonic() - killed < GAP_WATCH:
        try:
            held = stack.sweep_holder()
        except Exception:  # noqa: BLE001 - Redis restarting under another fault: look again
            held = (holder, None)
        if held is None or held[0] != holder:
            break
        time.sleep(0.1)
    gap = time.monotonic() - killed
    with tally.lock:
        tally.sweep_gaps.append(gap)
    tally.broke(
        f"dead sweep holders noticed after more than {GAP_LIMIT:g} s",
        f"{holder} kept the lock {gap:.1f} s after its SIGKILL",
        int(gap > GAP_LIMIT),
    )


def stranded_by_the_dead(stack, tally: Tally) -> bool:
    """False while the lock names a process that is no worker alive (one
    killed by another fault mid sweep): the fault waits, and it is counted
    once per holder."""
    held = stack.sweep_holder()
    if held is None or held[1] is not None:
        return True
    with tally.lock:
        if held[0] not in tally.dead_holders:
            tally.dead_holders.add(held[0])
            tally.figures["sweep lock found naming a dead worker (other kills)"] += 1
    return False
