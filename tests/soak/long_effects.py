"""The soak's faults under long side effects (docs/architecture.md, "Leases"):

- `freeze effects main process`: a chain of a long side effect and two short
  ones; one second into the long one, its worker's main process is
  SIGSTOPped for one and a half to two and a half leases, then SIGCONTed. Its
  lease lapses: the long step must stop itself before it is judged lost, so
  the next step, sent by the sweep, never runs beside it (the overlap check).
- `restart redis under long side effects`: Redis stopped (SIGTERM or SIGKILL)
  for up to 2 s a few seconds into a long side effect: its worker and the
  call must live on (counted: how many such calls ended `ok`).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
import uuid
from pathlib import Path

from runtime.settings import Settings
from tests.soak.backlog import slow
from tests.soak.batches import WRITES, workspace_for
from tests.soak.checks import follow
from tests.soak.tally import Tally
from tests.support.tools import marks

LEASE = Settings.model_fields["lease_seconds"].default  # the soak's stack keeps the default
FROZEN = (1.5 * LEASE, 2.5 * LEASE)
TIMEOUT = 90
STARTED = 45.0  # seconds the long step may wait in a backed-up queue


def freeze_effects_main(stack, runtime, base: Path, tally: Tally, rng: random.Random) -> None:
    long = slow("l1", rng.uniform(3 * LEASE, 4 * LEASE))
    submitted = _submit(runtime, base, tally, [long, slow("l2", 0.3), slow("l3", 0.3)])
    if submitted is None:
        return
    calls, handle, workspace = submitted
    main = _runner(stack, workspace)
    if main is None:
        tally.figures["freezes skipped: the long step never started"] += 1
    else:
        time.sleep(1.0)  # into the step, as the issue saw it
        with contextlib.suppress(ProcessLookupError):  # killed by another fault meanwhile
            os.kill(main, signal.SIGSTOP)
            try:
                time.sleep(rng.uniform(*FROZEN))
            finally:
                os.kill(main, signal.SIGCONT)
    follow(runtime, tally, calls, handle, workspace)


def restart_under_long_effects(stack, runtime, base: Path, tally: Tally, rng: random.Random):
    """Submitted and hurt on the injector's thread (one Redis restart at a
    time), followed on a thread of its own."""
    long = slow("l1", rng.uniform(2 * LEASE, 3 * LEASE))
    submitted = _submit(runtime, base, tally, [long, slow("l2", 0.3)])
    if submitted is None:
        return
    calls, handle, workspace = submitted
    if _runner(stack, workspace) is not None:
        time.sleep(rng.uniform(1.0, 3.0))
        stack.restart_redis(down=rng.uniform(0.5, 2.0), crash=rng.random() < 0.5)
    tally.spawn(_followed_long, runtime, tally, calls, handle, workspace)


def _followed_long(runtime, tally: Tally, calls: list[dict], handle, workspace: Path) -> None:
    follow(runtime, tally, calls, handle, workspace)
    [batch] = [b for b in tally.followed if b[0] == handle.batch_id]
    status = batch[2].get("l1")
    with tally.lock:
        tally.figures[f"long side effects under a Redis restart that ended {status}"] += 1


def _submit(runtime, base: Path, tally: Tally, calls: list[dict]):
    """(calls, handle, workspace) of a batch of `calls`; None if it could not be submitted."""
    workspace = workspace_for(base, tally.number())
    spec = {"mode": "auto", "workspace": workspace, "rules": WRITES, "timeout": TIMEOUT}
    try:
        handle = runtime.submit(calls, **spec, key=f"soak-long-{uuid.uuid4().hex}")
    except Exception as error:  # noqa: BLE001 - counted, and the soak goes on
        tally.error(f"submit: {type(error).__name__}: {error}")
        return None
    return calls, handle, workspace


def _runner(stack, workspace: Path) -> int | None:
    """The main process of the effects worker whose pool runs the long step,
    once it has started; None if it did not start in time."""
    give_up = time.monotonic() + STARTED
    while time.monotonic() < give_up:
        started = [m for m in marks(workspace, "effects") if m["label"] == "l1"]
        if started:
            pid = started[0]["pid"]
            runners = [w for w in stack.workers("effects") if pid in stack.pool_processes(w)]
            return runners[0]["pid"] if runners else None
        time.sleep(0.1)
    return None
