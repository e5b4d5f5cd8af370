"""Every call ends within its timeout plus a small grace, on both queues,
whatever the tool does: spin, block on a socket, wait for a child that
ignores SIGTERM, wait for a long subprocess, backtrack in `re`. A read ends
`timeout`; a side effect `outcome_unknown` (it may have done part of its work).
Tools that hold the GIL in C are `test_faults_stuck.py`'s.

A stack of its own: what a timed-out tool leaves behind (a thread blocked in
C, a child process) must not slow the other tests down."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from runtime.types import Status
from tests.support.fault_tools import POOLS, STALLS, TIMEOUT
from tests.support.faults import FaultStack
from tests.support.tools import marks

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]
GRACE = 1.0  # seconds a call may take past its timeout, as its result measures it
STALLED = [f"{stall}_{pool}" for stall in STALLS for pool in POOLS]
ALLOW = {"allow": STALLED}


@pytest.fixture(scope="module")
def timeouts_stack(tmp_path_factory, user_settings):
    home = tmp_path_factory.mktemp("faults-timeouts")
    slots = {"reads_concurrency": 8, "effects_concurrency": 1}
    with FaultStack(home, user_settings=user_settings, **slots) as stack:
        with stack.client() as runtime:
            yield stack, runtime


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process and its threads so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def end_children(workspace: Path) -> list[int]:
    """SIGKILL the children the tools started (those still running); their pids."""
    alive = []
    for mark in marks(workspace, "runs"):
        pid = mark.get("child")
        if pid and Path(f"/proc/{pid}").exists():
            alive.append(pid)
            os.kill(pid, signal.SIGKILL)
    return alive


def test_every_stalling_tool_ends_timeout_on_time_on_both_pools(timeouts_stack, workspace):
    stack, runtime = timeouts_stack
    batch = [{"id": name, "name": name, "arguments": {"label": name}} for name in STALLED]
    batch.append({"id": "after", "name": "nap", "arguments": {"label": "after"}})
    began = time.monotonic()
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=60
    )
    try:
        results = handle.results(timeout=60)
    finally:
        leftovers = end_children(workspace)
    took = time.monotonic() - began

    for result in results[:-1]:
        ended = Status.timeout if result.tool.endswith("_read") else Status.outcome_unknown
        assert result.status is ended, (result.call_id, result.model_message)
        assert f"timed out after {TIMEOUT:g} s" in result.model_message
        assert result.duration_ms / 1000 <= TIMEOUT + GRACE, (result.call_id, result.duration_ms)
    assert results[-1].ok  # the worker that timed out still serves calls
    # Read stalls run together; each write stall is an ordered step of its own.
    assert took < (1 + len(STALLS)) * (TIMEOUT + GRACE) + 5
    assert {m["tool"] for m in marks(workspace, "runs")} >= set(STALLS)
    # A tool's own children outlive its call: only the tool knows them (the
    # shell tool ends its process group), so the test ends them itself.
    assert len(leftovers) <= 2 * len(POOLS)


def test_a_spinning_tool_stops_burning_cpu_once_its_call_timed_out(timeouts_stack, workspace):
    stack, runtime = timeouts_stack
    batch = [
        {"id": f"s{i}", "name": f"spin_{pool}", "arguments": {"label": f"s{i}", "seconds": 20}}
        for i, pool in enumerate(POOLS)
    ]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=ALLOW, timeout=30)
    statuses = [r.status for r in handle.results(timeout=30)]
    assert statuses == [Status.timeout, Status.outcome_unknown]
    workers = stack.workers("reads") + stack.workers("effects")
    processes = [pid for worker in workers for pid in stack.pool_processes(worker)]
    before = {pid: cpu_seconds(pid) for pid in processes}
    time.sleep(2.0)
    burnt = {pid: cpu_seconds(pid) - before[pid] for pid in processes}
    assert all(seconds < 0.5 for seconds in burnt.values()), burnt
    assert not [m for m in marks(workspace, "runs") if m["tool"] == "spin_end"]
