"""The fault `lock ledger at process start`: another process holds the ledger's
write lock (SQLite: `BEGIN EXCLUSIVE`; PostgreSQL: every toolrun table in
EXCLUSIVE mode, tests/support/ledger_lock.py) while a submitter process makes
its Runtime and submits a keyed batch, and a few seconds more.
The process must start and submit; the batch keeps its key, plan and
deadline, and ends: submitting its key again afterwards attaches to it."""

from __future__ import annotations

import queue
import random
import signal
import subprocess
import time
import uuid
from pathlib import Path

from runtime.errors import InvalidBatch
from tests.soak.batches import BATCH_TIMEOUT, WRITES, batch_of, workspace_for
from tests.soak.checks import follow
from tests.soak.tally import Tally
from tests.support.ledger_lock import held_elsewhere
from tests.support.submitter import IMPORTED, READY, last_words, lines, start

IMPORT_PATIENCE = 120.0  # seconds for the process's imports, before the lock (a loaded machine)
START_PATIENCE = 20.0  # seconds for it to make its Runtime under the lock (or die trying)
LAND_PATIENCE = 30.0  # seconds for its rows to land once the lock is gone
HOLD = (1.0, 4.0)  # seconds the lock is held after that, so that the submit falls in it too


def locked_start(stack, runtime, base: Path, tally: Tally, rng: random.Random) -> None:
    number = tally.number()
    calls = batch_of(rng, number)
    workspace = workspace_for(base, number)
    spec = {
        "calls": calls,
        "mode": "auto",
        "workspace": str(workspace),
        "rules": WRITES,
        "on_error": rng.choice(["stop", "continue"]),
        "timeout": BATCH_TIMEOUT,
        "key": f"soak-locked-{uuid.uuid4().hex}",
    }
    gate = base / f"locked-{number}.gate"
    process = start(stack, {**spec}, gate, results=True)  # it lives until its batch ends
    out = lines(process)
    if _line(out, IMPORT_PATIENCE) != IMPORTED:
        process.kill()
        process.wait(10)
        raise RuntimeError(f"the submitter did not get through its imports: {last_words(process)}")
    with held_elsewhere(stack.direct_ledger_url()):
        gate.touch()
        ready = _line(out, START_PATIENCE)
        if ready == READY:
            time.sleep(rng.uniform(*HOLD))  # the fault's length, not a wait for a fact
    batch_id = _line(out, 60) if ready == READY else None
    if ready != READY or not batch_id:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        hung = process.returncode == -signal.SIGKILL  # killed here: it had not died
        said = last_words(process)
        if "StateUnavailable" in said:  # Redis restarting under another fault: an honest refusal
            with tally.lock:
                tally.figures["locked-start submits refused while Redis was down"] += 1
            return
        what = ("hung" if hung else "died") + (" at start" if ready != READY else " submitting")
        tally.broke(f"processes that {what} while the ledger was locked", said)
        return
    handle = _attach(runtime, batch_id)
    if handle is None:
        tally.broke("batches of a locked start never in the ledger", batch_id)
    else:
        follow(runtime, tally, calls, handle, workspace)
    try:
        process.wait(90)  # it has its results too, and exits
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
        tally.broke("submitters of a locked start that never ended", batch_id)
    again = _submit(runtime, spec)
    if again != batch_id:
        tally.broke("keys lost in a ledger outage", f"{spec['key']}: again {again}")


def _attach(runtime, batch_id: str):
    """A handle on the batch once its submitter's rows have landed (it wrote
    them from its buffer once the lock was gone); None if they never do."""
    give_up = time.monotonic() + LAND_PATIENCE
    while True:
        try:
            return runtime.attach(batch_id)
        except InvalidBatch:
            if time.monotonic() > give_up:
                return None
            time.sleep(0.5)


def _submit(runtime, spec: dict) -> str:
    """The batch a second submit of `spec` attaches to, or why it was refused."""
    try:
        handle = runtime.submit(**spec)
    except Exception as error:  # noqa: BLE001 - the figure says it
        return f"{type(error).__name__}: {error}"
    handle.results(timeout=90)  # a new batch (its key lost) runs: let it end
    return handle.batch_id


def _line(out: queue.Queue, patience: float) -> str | None:
    try:
        return out.get(timeout=patience)
    except queue.Empty:
        return None
