"""Cancelling a batch mid-way, from its handle or with `toolrun cancel BATCH_ID`
from another process: calls not started end `cancelled` (also those already
waiting in Redis), running reads end with their real result or, past the
grace, `cancelled`; exactly one result per call, and no side effect runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from runtime.batch.progress import CANCEL_GRACE
from runtime.types import Status
from tests.support.tools import marks

pytestmark = [pytest.mark.faults, pytest.mark.timeout(60)]
ALLOW = {"allow": ["bump"]}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def wait_started(workspace, count: int, timeout: float = 20) -> None:
    """Until `count` naps have started (a read's ledger rows land when it ends)."""
    deadline = time.monotonic() + timeout
    while len({m["call_id"] for m in marks(workspace, "starts")}) < count:
        assert time.monotonic() < deadline, "the batch did not start"
        time.sleep(0.05)


def one_result_each(handle, timeout: float) -> dict:
    streamed = list(handle.stream(timeout=timeout, notices=False))
    ids = [r.call_id for r in streamed]
    assert sorted(ids) == sorted(c.id for c in handle.batch.calls), ids
    return {r.call_id: r for r in streamed}


def test_handle_cancel_ends_calls_not_started_and_lets_running_reads_finish(runtime, workspace):
    # Ten reads for the session stack's eight reads slots: two wait in Redis.
    reads = [call(f"r{i}", "nap", label=f"n{i}", seconds=1.5) for i in range(10)]
    batch = [*reads, call("w1", "bump", label="w1"), call("after", "nap", label="after"),
             call("w2", "bump", label="w2")]  # fmt: skip
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=40)
    wait_started(workspace, 4)
    began = time.monotonic()
    handle.cancel(by="test")
    results = one_result_each(handle, timeout=30)
    assert time.monotonic() - began < CANCEL_GRACE + 2

    for call_id in ("w1", "after", "w2"):
        assert results[call_id].status is Status.cancelled, results[call_id].model_message
        assert "did not run" in results[call_id].model_message
    statuses = {results[f"r{i}"].status for i in range(10)}
    assert Status.ok in statuses and statuses <= {Status.ok, Status.cancelled}, statuses
    assert marks(workspace, "effects") == []
    ran = {m["label"] for m in marks(workspace, "intervals")}
    assert "after" not in ran
    deadline = time.monotonic() + 10  # the client records an end just after it hands it over
    while True:
        rows = {row.call_id: row.status for row in runtime.ledger.calls(handle.batch_id)}
        if {rows[c] for c in ("w1", "after", "w2")} == {"cancelled"}:
            break
        assert time.monotonic() < deadline, rows
        time.sleep(0.1)


def test_toolrun_cancel_from_another_process_abandons_long_reads_after_the_grace(
    runtime, stack, workspace
):
    batch = [
        call("long", "nap", label="long", seconds=CANCEL_GRACE + 3),
        call("short", "nap", label="short", seconds=0.5),
        call("w1", "bump", label="w1"),
    ]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=40)
    wait_started(workspace, 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
    env |= {"TOOLRUN_HOME": str(stack.home), "TOOLRUN_DATABASE_URL": stack.database_url}
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "cancel", handle.batch_id, "--by", "ops"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"cancelled batch {handle.batch_id}" in done.stdout
    results = one_result_each(handle, timeout=30)
    assert time.monotonic() - began < CANCEL_GRACE + 3

    assert results["short"].ok
    assert results["long"].status is Status.cancelled
    assert "abandoned" in results["long"].model_message
    assert results["w1"].status is Status.cancelled
    assert marks(workspace, "effects") == []
