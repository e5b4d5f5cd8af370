"""The soak's steady load: submitters that send batch after batch, some from a
process of their own SIGKILLed soon after (the batch goes on in the cluster)."""

from __future__ import annotations

import random
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from runtime.errors import InvalidBatch
from tests.soak.checks import follow
from tests.soak.tally import Tally
from tests.support.submitter import last_words, spawn

WRITES = {"allow": ["bump", "slow_bump", "hold_gil_write", "overrun_write"]}
STUCK = ["hold_gil_read", "hold_gil_write", "backtrack_read", "overrun_write"]
KILLED_SUBMITTERS = 0.2  # the share of batches whose submitting process is SIGKILLed
BATCH_TIMEOUT = 30
AWAY = "does not answer"  # a process's one line when the deployment is away ("Failing fast")


def batch_of(rng: random.Random, number: int) -> list[dict]:
    """Reads and side effects in a random order; every side effect has a label of its own."""
    calls = []
    for index in range(rng.randint(3, 10)):
        call_id, kind = f"c{index}", rng.random()
        if kind < 0.55:
            arguments = {"label": f"{number}.{index}", "seconds": rng.choice([0, 0.1, 0.3, 0.8])}
            calls.append({"id": call_id, "name": "nap", "arguments": arguments})
        elif kind < 0.75:
            calls.append({"id": call_id, "name": "bump", "arguments": {"label": call_id}})
        elif kind < 0.87:
            arguments = {"label": call_id, "seconds": rng.choice([0.2, 0.6])}
            calls.append({"id": call_id, "name": "slow_bump", "arguments": arguments})
        elif kind < 0.9:
            arguments = {"label": call_id, "seconds": 2.0}  # past the stuck tools' timeout
            calls.append({"id": call_id, "name": rng.choice(STUCK), "arguments": arguments})
        else:
            calls.append({"id": call_id, "name": "echo", "arguments": {"text": call_id}})
    return calls


def workspace_for(base: Path, number: int) -> Path:
    return Path(tempfile.mkdtemp(dir=base, prefix=f"b{number}-"))


def submitter(stack, runtime, base: Path, tally: Tally, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
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
        }
        try:
            if rng.random() < KILLED_SUBMITTERS:  # the batch must go on without its submitter
                handle = killed_submitter(stack, runtime, tally, rng, spec)
                if handle is None:
                    continue
            else:
                handle = runtime.submit(**spec)
        except Exception as error:  # noqa: BLE001 - counted, and the soak goes on
            tally.broke(f"submits that raised {type(error).__name__}", str(error)[:200])
            stop.wait(1.0)  # the ledger away, say: not a submit a millisecond meanwhile
            continue
        follow(runtime, tally, calls, handle, workspace)


def killed_submitter(stack, runtime, tally: Tally, rng: random.Random, spec: dict):
    """Submit from a process of its own, SIGKILL it soon after, and attach
    (None: the process died before its batch was submitted)."""
    process, batch_id = spawn(stack, spec)
    if not batch_id:
        try:
            process.wait(5)  # it may be dying still, its stdout closed
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
        process.kill()
        process.wait(10)
        said = last_words(process)
        if not hung and AWAY in said:  # started while Redis restarted: it fails fast, by design
            with tally.lock:
                tally.figures["submitter processes refused at start: Redis away"] += 1
            return None
        what = "hung" if hung else "died"
        tally.broke(f"submitter processes that {what} before submitting", said)
        return None
    time.sleep(rng.uniform(0, 1.0))
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    with tally.lock:
        tally.faults["kill submitter"] += 1
    try:
        return runtime.attach(batch_id)
    except InvalidBatch as error:  # submitted during a ledger cut, and lost with its process
        tally.broke("batches not in the ledger after their submitter died", str(error))
        return None
