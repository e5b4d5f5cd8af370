"""The fault `back up effects queue`: chains of slow side effects, submitted at
once, more than the effects slots finish within the sweep's resend (15 s), so
calls wait in the queue past it while others of theirs run. A call must never
be declared lost while a worker still runs it, however long the queue
(docs/architecture.md, "One end per call"); the overlap check sees it if one is."""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path

from tests.soak.batches import WRITES, workspace_for
from tests.soak.checks import follow
from tests.soak.tally import Tally
from tests.support.tools import marks

CHAINS_PER_SLOT = 4
FIRST = (4.0, 7.0)  # seconds of each chain's first side effect: the queue's wait builds on them
SECOND = (1.0, 3.0)
TIMEOUT = 60
WAIT_PAST = 15.0  # runtime/batch/advance.py's RESEND_STALE


def back_up_effects(stack, runtime, base: Path, tally: Tally, rng: random.Random, slots: int):
    for _ in range(CHAINS_PER_SLOT * slots):
        number = tally.number()
        calls = [
            slow("e1", rng.uniform(*FIRST)),
            {"id": "r", "name": "nap", "arguments": {"label": f"{number}.r", "seconds": 0.1}},
            slow("e2", rng.uniform(*SECOND)),
        ]
        workspace = workspace_for(base, number)
        spec = {"mode": "auto", "workspace": workspace, "rules": WRITES, "timeout": TIMEOUT}
        try:
            handle = runtime.submit(calls, **spec, key=f"soak-backlog-{uuid.uuid4().hex}")
        except Exception as error:  # noqa: BLE001 - counted, and the soak goes on
            tally.error(f"submit: {type(error).__name__}: {error}")
            continue
        tally.spawn(chain, runtime, tally, calls, handle, workspace, time.time())


def chain(runtime, tally: Tally, calls: list[dict], handle, workspace: Path, sent: float) -> None:
    """Follow one chain, and say how long its side effects waited in the queue
    (a wait past 15 s is one the sweep's resend has acted on)."""
    follow(runtime, tally, calls, handle, workspace)
    starts = {m["label"]: m["at"] for m in marks(workspace, "effects")}
    ends = {m["label"]: m["at"] for m in marks(workspace, "effects_done")}
    waits = [starts["e1"] - sent] if "e1" in starts else []
    waits += [starts["e2"] - ends["e1"]] if "e2" in starts and "e1" in ends else []
    with tally.lock:
        for wait in waits:
            figure = "side effects that waited in the queue past the resend (15 s)"
            tally.figures[figure] += wait > WAIT_PAST
            longest = "longest wait of a backed-up side effect (s)"
            tally.figures[longest] = round(max(tally.figures[longest], wait), 1)


def slow(call_id: str, seconds: float) -> dict:
    return {"id": call_id, "name": "slow_bump", "arguments": {"label": call_id, "seconds": seconds}}
