"""Stuck and hostile tools on real workers: C code that holds the GIL on both
queues, side effects that overrun their timeout, calls their batch gave up on.
Every call is stopped (its pool process killed and replaced at its timeout
plus the kill grace), side effects never overlap, the ledger stays writable
from other processes, and an abandoned call never runs later."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from sqlalchemy.engine import make_url

from runtime.types import Status
from tests.support.fault_tools import TIMEOUT
from tests.support.faults import FaultStack
from tests.support.tools import marks

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]
KILL_GRACE = 1.0
LIMIT = TIMEOUT + KILL_GRACE  # when a stuck call's process is killed
ALLOW = {"allow": ["backtrack_write", "hold_gil_write", "overrun_write", "slow_bump"]}


@pytest.fixture(scope="module")
def stuck_stack(tmp_path_factory, user_settings):
    home = tmp_path_factory.mktemp("faults-stuck")
    slots = {"reads_concurrency": 4, "effects_concurrency": 2, "kill_grace": KILL_GRACE}
    with FaultStack(home, user_settings=user_settings, **slots) as stack:
        with stack.client() as runtime:
            yield stack, runtime


class LedgerProbe:
    """Takes and releases the SQLite ledger's write lock from this process (not
    a worker) over and over while a test runs; the longest wait is `worst`."""

    def __init__(self, url: str) -> None:
        self.path = make_url(url).database
        self.worst = 0.0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._probe, daemon=True)

    def __enter__(self) -> LedgerProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _probe(self) -> None:
        while not self._stop.wait(0.1):
            began = time.monotonic()
            try:
                with sqlite3.connect(self.path, timeout=10, isolation_level=None) as connection:
                    connection.execute("BEGIN IMMEDIATE")
                    connection.execute("ROLLBACK")
            except sqlite3.Error as error:
                self.failures.append(str(error))
            self.worst = max(self.worst, time.monotonic() - began)


def test_calls_holding_the_gil_are_killed_on_both_queues(stuck_stack, workspace):
    stack, runtime = stuck_stack
    reads = [
        {"id": f"r{i}", "name": "hold_gil_read", "arguments": {"label": f"r{i}"}} for i in range(20)
    ]
    writes = [
        {"id": f"w{i}", "name": "hold_gil_write", "arguments": {"label": f"w{i}"}} for i in range(2)
    ]
    after = [
        {"id": "read", "name": "nap", "arguments": {"label": "after"}},
        {"id": "write", "name": "slow_bump", "arguments": {"label": "after"}},
    ]
    with LedgerProbe(stack.settings.ledger_url) as probe:
        handle = runtime.submit(
            [*reads, *writes, *after],
            mode="auto",
            workspace=workspace,
            rules=ALLOW,
            on_error="continue",
            timeout=90,
        )
        results = {result.call_id: result for result in handle.results(timeout=90)}

    for call in reads:
        result = results[call["id"]]
        assert result.status is Status.timeout, (result.call_id, result.model_message)
        assert "process running it was killed" in result.model_message
    for call in writes:
        result = results[call["id"]]
        assert result.status is Status.outcome_unknown, (result.call_id, result.model_message)
        assert "check its effect" in result.model_message
    assert results["read"].ok and results["write"].ok  # both queues serve again
    assert len(marks(workspace, "runs")) == 22  # each stuck call ran once, none was redelivered
    assert not any(m["tool"] == "hold_gil_end" for m in marks(workspace, "runs"))
    assert not probe.failures and probe.worst < 3.0, (probe.worst, probe.failures)
    rows = {row.call_id: row for row in runtime.ledger.calls(handle.batch_id)}
    assert {rows[c["id"]].status for c in reads} == {"timeout"}
    assert {rows[c["id"]].status for c in writes} == {"outcome_unknown"}


def test_side_effects_that_overrun_never_overlap(stuck_stack, workspace):
    stack, runtime = stuck_stack
    batch = [
        {"id": "a", "name": "overrun_write", "arguments": {"label": "a", "seconds": 3}},
        {"id": "b", "name": "overrun_write", "arguments": {"label": "b", "seconds": 3}},
        {"id": "c", "name": "hold_gil_write", "arguments": {"label": "c"}},
        {"id": "d", "name": "overrun_write", "arguments": {"label": "d", "seconds": 0}},
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=60
    )
    results = {result.call_id: result for result in handle.results(timeout=60)}

    for call_id in "abc":
        assert results[call_id].status is Status.outcome_unknown, results[call_id]
    assert results["d"].ok
    stamps = {(m["label"], m["edge"]): m["at"] for m in marks(workspace, "stamps")}
    assert stamps[("a", "end")] - stamps[("a", "start")] < TIMEOUT + 0.5  # stopped at its timeout
    assert stamps[("a", "end")] <= stamps[("b", "start")]
    assert stamps[("b", "end")] <= min(m["at"] for m in marks(workspace, "runs"))  # c started
    hold = next(m for m in marks(workspace, "runs") if m["tool"] == "hold_gil")
    assert stamps[("d", "start")] >= hold["at"] + LIMIT  # c's process was killed first


def test_a_call_its_batch_gave_up_on_never_runs_later(stuck_stack, workspace):
    stack, runtime = stuck_stack
    for queue in ("reads", "effects"):
        for worker in stack.workers(queue):
            stack.kill_worker(worker)
    handles = [
        runtime.submit(
            [{"id": "read", "name": "nap", "arguments": {"label": "abandoned"}}],
            mode="auto",
            workspace=workspace,
            timeout=2,
        ),
        runtime.submit(
            [{"id": "write", "name": "slow_bump", "arguments": {"label": "abandoned"}}],
            mode="auto",
            workspace=workspace,
            rules=ALLOW,
            timeout=2,
        ),
    ]
    ended = [handle.results(timeout=30)[0].status for handle in handles]
    # The read was sent: it ends `timeout`. The side effect was never claimed by a
    # worker, which the ledger knows: it did not start, so it ends `skipped`.
    assert ended == [Status.timeout, Status.skipped]

    for queue in ("reads", "effects"):
        stack.add_worker(queue)
    probe = runtime.submit(
        [{"id": "p", "name": "nap", "arguments": {"label": "probe"}}],
        mode="auto",
        workspace=workspace,
        timeout=30,
    )
    assert probe.results(timeout=30)[0].ok  # the new workers have taken the old messages
    time.sleep(1.0)
    assert [m["label"] for m in marks(workspace, "starts")] == ["probe"]
    assert not marks(workspace, "effects")
