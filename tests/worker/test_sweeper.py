"""The sweep lock's value names the process holding it (runtime/worker/sweeper.py),
in the one format the soak's fault `kill sweep holder` reads back
(tests/support/faults.py, `holder_worker`): change both together."""

from __future__ import annotations

import os

from runtime.worker.sweeper import sweep_holder as holder_id
from tests.support.faults import holder_worker


def worker(name: str, pid: int) -> dict:
    return {"name": name, "queue": "effects", "pid": pid, "log": ""}


def test_a_holder_id_names_its_process_and_differs_per_loop():
    first, second = holder_id(), holder_id()
    assert first.split(":")[1] == str(os.getpid())
    assert first != second


def test_the_soak_finds_the_worker_a_holder_id_names():
    ours = worker("effects-1-abc@host", os.getpid())
    others = [worker("reads-1-def@host", os.getpid() + 1), ours]
    assert holder_worker(holder_id(), others) is ours
    assert holder_worker("host:1:nonce", others) is None
    assert holder_worker("effects-1-abc@host", others) is ours
