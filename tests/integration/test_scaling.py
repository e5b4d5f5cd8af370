"""Horizontal scaling with real processes: two `reads` and two `effects` workers
with their own node names share the queues; batches from many orchestrator
processes at once each get their own results; a worker of each kind stopped
warmly in the middle of a batch loses nothing and runs no side effect twice.

The tests run in file order: the last one stops workers."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runtime.settings import Settings
from runtime.types import Status
from tests.conftest import TEST_TOOLS
from tests.support.tools import held_running, marks, release

pytestmark = pytest.mark.timeout(60)
WRITES = {"allow": ["bump", "write_file"]}
SUBMITTERS = 8


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    from runtime.stack.embedded import start_stack, stop_stack

    home = tmp_path_factory.mktemp("scaled-home")
    settings = Settings(
        home=home,
        redis_url=None,
        database_url=None,
        tool_modules=TEST_TOOLS,
        reads_concurrency=2,
        effects_concurrency=1,
    )
    record = start_stack(
        settings,
        flower=False,
        reads_workers=2,
        effects_workers=2,
        extra_env={"TOOLRUN_TOOL_MODULES": TEST_TOOLS},
    )
    yield record
    stop_stack(home)


def client_settings(record, user_settings: Path) -> Settings:
    return Settings(
        home=record.home,
        redis_url=record.redis_url,
        database_url=record.database_url,
        tool_modules=TEST_TOOLS,
        user_settings_file=user_settings,
    )


@pytest.fixture(scope="module")
def scaled_runtime(scaled, user_settings):
    from runtime.client import Runtime

    runtime = Runtime(client_settings(scaled, user_settings))
    yield runtime
    runtime.close()


def names(record, queue: str) -> set[str]:
    return {worker["name"] for worker in record.workers if worker["queue"] == queue}


def test_the_workers_have_their_own_names_and_toolrun_status_lists_them(scaled, monkeypatch):
    from typer.testing import CliRunner

    from runtime.cli import app

    assert len({worker["name"] for worker in scaled.workers}) == 4
    assert len(names(scaled, "reads")) == 2 and len(names(scaled, "effects")) == 2
    for name in [key for key in os.environ if key.startswith("TOOLRUN_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TOOLRUN_HOME", str(scaled.home))  # the stack record says the rest
    shown = CliRunner().invoke(app, ["status", "--json"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.output)
    assert {(w["name"], w["up"], tuple(w["queues"])) for w in report["workers"]} == {
        (w["name"], True, (w["queue"],)) for w in scaled.workers
    }
    assert report["queues"] == {"reads": 0, "effects": 0}


def test_reads_spread_over_both_reads_workers_and_order_still_holds(
    scaled, scaled_runtime, workspace
):
    naps = [call(f"r{i}", "nap", label=f"n{i}", seconds=0.3) for i in range(8)]
    batch = [
        *naps,
        call("w1", "write_file", path="notes.txt", content="first"),
        call("a", "read_file", path="notes.txt"),
        call("w2", "bump", label="one"),
        call("w3", "write_file", path="notes.txt", content="second"),
        call("b", "read_file", path="notes.txt"),
        call("w4", "bump", label="two"),
    ]
    handle = scaled_runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    results = {result.call_id: result for result in handle.results(timeout=45)}
    assert all(r.status is Status.ok for r in results.values()), results

    reads = {results[f"r{i}"].worker for i in range(8)}
    assert reads == names(scaled, "reads")  # both took a share
    for call_id in ("w1", "w2", "w3", "w4"):
        assert results[call_id].worker in names(scaled, "effects")
    assert "first" in results["a"].content["text"] and "second" in results["b"].content["text"]
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["one", "two"]

    finished = {
        event.call_id: event.worker
        for event in scaled_runtime.ledger.events(handle.batch_id)
        if event.kind == "finished"
    }
    assert finished == {call_id: result.worker for call_id, result in results.items()}


def _submit_from_another_process(settings: Settings, index: int, workspace: str, barrier, out):
    """One orchestrator process: its own Runtime, one batch, its results back."""
    from runtime.client import Runtime

    runtime = Runtime(settings)
    try:
        batch = [call(f"c{j}", "echo", text=f"p{index}-c{j}") for j in range(4)]
        batch.append(call("c4", "bump", label=f"p{index}"))
        barrier.wait(timeout=30)
        handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
        results = handle.results(timeout=40)
        out.put((index, handle.batch_id, [(r.call_id, r.status.value, r.content) for r in results]))
    finally:
        runtime.close()


def test_many_orchestrator_processes_each_get_exactly_their_own_results(
    scaled, user_settings, tmp_path
):
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(SUBMITTERS), context.Queue()
    settings = client_settings(scaled, user_settings)
    workspaces = [tmp_path / f"ws{index}" for index in range(SUBMITTERS)]
    processes = []
    for index, workspace in enumerate(workspaces):
        workspace.mkdir()
        processes.append(
            context.Process(
                target=_submit_from_another_process,
                args=(settings, index, str(workspace), barrier, out),
            )
        )
    for process in processes:
        process.start()
    answers = [out.get(timeout=50) for _ in processes]
    for process in processes:
        process.join(timeout=10)
    assert [process.exitcode for process in processes] == [0] * SUBMITTERS

    assert len({batch_id for _, batch_id, _ in answers}) == SUBMITTERS
    for index, _batch_id, results in answers:
        # The same call ids in every batch: results are routed by batch, not by call.
        assert [call_id for call_id, _, _ in results] == ["c0", "c1", "c2", "c3", "c4"]
        assert all(status == "ok" for _, status, _ in results), results
        texts = [content["text"] for _, _, content in results[:4]]
        assert texts == [f"p{index}-c{j}" for j in range(4)]
        assert [m["label"] for m in marks(workspaces[index], "effects")] == [f"p{index}"]


def test_status_shows_workers_active_calls_queues_and_pending_approvals(
    scaled, scaled_runtime, workspace, request
):
    from runtime.stack import status

    request.addfinalizer(lambda: release(workspace, "status"))  # a failed test frees its workers
    # Six reads that run until released, for four reads slots: four run, two wait.
    batch = [call(f"s{i}", "held", label="status") for i in range(6)]
    asking = [call("ask", "bump", label="asks")]  # default mode: a write waits for a person
    naps = scaled_runtime.submit(batch, mode="auto", workspace=workspace)
    waiting = scaled_runtime.submit(asking, mode="default", workspace=workspace)
    deadline = time.monotonic() + 30  # a bound on a broken stack, not a measure
    while True:
        report = status.collect(scaled_runtime.settings, timeout=1.0)
        active = {
            c.call_id for w in report.workers for c in w.active if c.batch_id == naps.batch_id
        }
        pending = [a for a in report.pending_approvals or [] if a.batch_id == waiting.batch_id]
        if len(active) == 4 and pending:
            break
        assert time.monotonic() < deadline, report
        time.sleep(0.2)

    assert {w.name for w in report.workers if w.up} == {w["name"] for w in scaled.workers}
    for worker in report.workers:
        assert worker.queues == [
            next(w["queue"] for w in scaled.workers if w["name"] == worker.name)
        ]
        assert all(c.tool == "toolrun.held" for c in worker.active)
    assert report.queues["reads"] == 2  # 2 workers x 2 threads run 4, two wait
    assert [(a.call_id, a.tool) for a in pending] == [("ask", "bump")]
    assert report.schema_revision == report.schema_head and report.problems == []
    text = "\n".join(status.lines(report))
    assert "s0" in text and "1 pending" in text and "reads: 2 waiting" in text

    assert scaled_runtime.deny(waiting.batch_id, "ask", "not now", by="test")
    assert [r.status for r in waiting.results(timeout=20)] == [Status.denied]
    release(workspace, "status")
    assert all(r.status is Status.ok for r in naps.results(timeout=30))


def test_a_warm_stop_of_one_worker_of_each_kind_mid_batch_loses_nothing(
    scaled, scaled_runtime, workspace, request
):
    """The batch's first stage holds both reads workers busy until the test
    releases it, so the stop provably comes mid-batch: while the reads victim
    runs calls of it, and before anything of it has ended."""
    from runtime.stack.embedded import stop_worker

    request.addfinalizer(lambda: release(workspace, "first"))
    batch = [call(f"h{i}", "held", label="first") for i in range(4)]
    batch.append(call("w0", "bump", label="e0"))
    for step in range(1, 6):
        batch += [call(f"r{step}.{i}", "nap", label=f"n{step}.{i}", seconds=0.1) for i in range(4)]
        batch.append(call(f"w{step}", "bump", label=f"e{step}"))
    handle = scaled_runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
    seen = []
    reader = threading.Thread(target=lambda: seen.extend(handle.stream(timeout=50)))
    reader.start()
    running = held_running(workspace, 4)  # two on each reads worker (concurrency 2)
    held_by = {mark["call_id"]: mark["ppid"] for mark in running}
    reads_victim = next(w for w in scaled.workers if w["pid"] in held_by.values())
    victims = [reads_victim, next(w for w in scaled.workers if w["queue"] == "effects")]
    for victim in victims:  # a warm stop begins while the held reads run
        os.kill(victim["pid"], signal.SIGTERM)
    assert seen == []  # nothing could end yet: the first stage is held
    release(workspace, "first")
    stopped = {w["name"]: stop_worker(w, graceful=True, timeout=30) for w in victims}
    stopped_at = datetime.now(UTC)
    reader.join(timeout=50)

    assert stopped == {worker["name"]: True for worker in victims}
    assert sorted(r.call_id for r in seen) == sorted(c["id"] for c in batch)
    results = handle.results()
    assert all(r.status is Status.ok for r in results), [
        (r.call_id, r.status, r.model_message) for r in results if r.status is not Status.ok
    ]
    # The calls running at the stop ended there, with their own results.
    finished_on = {r.call_id: r.worker for r in results}
    assert {finished_on[c] for c, pid in held_by.items() if pid == reads_victim["pid"]} == {
        reads_victim["name"]
    }
    # Every side effect exactly once, in the model's order.
    assert [m["label"] for m in marks(workspace, "effects")] == [f"e{s}" for s in range(6)]
    events = scaled_runtime.ledger.events(handle.batch_id)
    runs = Counter(e.call_id for e in events if e.kind == "started" and e.call_id[0] == "w")
    assert runs == {f"w{step}": 1 for step in range(6)}
    gone = {worker["name"] for worker in victims}
    from runtime.stack import status

    report = status.collect(scaled_runtime.settings, timeout=1.0)
    assert {w.name for w in report.workers if not w.up} == gone
    assert "DOWN" in "\n".join(status.lines(report))
    later = [e for e in events if e.kind == "started" and e.at > stopped_at]
    assert not [e.call_id for e in later if e.worker in gone]
