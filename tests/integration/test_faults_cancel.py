"""Cancelling a batch mid-way, from its handle or with `toolrun cancel BATCH_ID`
from another process: calls not started end `cancelled` (also those already
waiting in Redis), running reads end with their real result or, past the
grace, `cancelled`; exactly one result per call, and no side effect runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runtime.types import Status
from tests.support.tools import held_running, marks, release
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(60)]
ALLOW = {"allow": ["bump"]}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def call_rows(runtime, batch_id: str) -> dict[str, str]:
    """Each call's status as the ledger's call rows hold it now."""
    return {row.call_id: row.status for row in runtime.ledger.calls(batch_id)}


def one_result_each(handle, timeout: float) -> dict:
    streamed = list(handle.stream(timeout=timeout, notices=False))
    ids = [r.call_id for r in streamed]
    assert sorted(ids) == sorted(c.id for c in handle.batch.calls), ids
    return {r.call_id: r for r in streamed}


def test_handle_cancel_ends_calls_not_started_and_lets_running_reads_finish(
    runtime, workspace, request
):
    # Ten reads for the session stack's eight reads slots: eight run until released,
    # two wait in Redis. The cancel comes while the eight provably run.
    request.addfinalizer(lambda: release(workspace, "reads"))
    reads = [call(f"r{i}", "held", label="reads") for i in range(10)]
    batch = [
        *reads,
        call("w1", "bump", label="w1"),
        call("after", "nap", label="after"),
        call("w2", "bump", label="w2"),
    ]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=40)
    running = {m["call_id"] for m in held_running(workspace, 8)}
    handle.cancel(by="test")
    release(workspace, "reads")  # within the grace: the running reads end with their results
    results = one_result_each(handle, timeout=30)

    for call_id in ("w1", "after", "w2"):
        assert results[call_id].status is Status.cancelled, results[call_id].model_message
        assert "did not run" in results[call_id].model_message
    assert {results[c].status for c in running} == {Status.ok}
    statuses = {results[f"r{i}"].status for i in range(10)}
    assert statuses <= {Status.ok, Status.cancelled}, statuses
    assert marks(workspace, "effects") == []
    ran = {m["label"] for m in marks(workspace, "intervals")}
    assert "after" not in ran

    # the client records an end just after it hands it over
    def cancelled() -> bool:
        rows = call_rows(runtime, handle.batch_id)
        return all(rows[c] == "cancelled" for c in ("w1", "after", "w2"))

    wait_for(cancelled, 10, "cancelled rows of w1, after and w2")


@pytest.mark.timeout(240)
def test_toolrun_cancel_from_another_process_abandons_long_reads_after_the_grace(
    runtime, stack, workspace, request
):
    """`long` runs until the test ends, so it is still running when the grace
    ends, however long the cancel takes to arrive; `short` is released as soon
    as the cancel has been made, so it ends within the grace with its result."""
    request.addfinalizer(lambda: release(workspace, "long"))
    batch = [
        call("long", "held", label="long"),
        call("short", "held", label="short"),
        call("w1", "bump", label="w1"),
    ]
    # The deadline lies past the cancel's arrival however busy the machine: a
    # `toolrun` process took over 30 s to start and cancel at a load of 15 on 2 cores.
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=300)
    held_running(workspace, 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
    env |= {"TOOLRUN_HOME": str(stack.home), "TOOLRUN_DATABASE_URL": stack.database_url}
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "cancel", handle.batch_id, "--by", "ops"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"cancelled batch {handle.batch_id}" in done.stdout
    release(workspace, "short")
    results = one_result_each(handle, timeout=30)

    assert results["short"].ok
    assert results["long"].status is Status.cancelled
    assert "abandoned" in results["long"].model_message
    assert results["w1"].status is Status.cancelled
    assert marks(workspace, "effects") == []
