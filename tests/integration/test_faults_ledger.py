"""The audit ledger cut for a few seconds: side effects refuse to run (their
result says the ledger is unavailable), reads go on, and once the ledger is
back every row is there, written from the buffers of the processes that held
them.

SQLite: a test connection holds the file's write lock (`BEGIN EXCLUSIVE`).
PostgreSQL (with TOOLRUN_TEST_POSTGRES_URL): a TCP relay in front of the
server drops every connection and refuses new ones."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from runtime.client import first_send
from runtime.types import Status
from tests.support.faults import FaultStack, Relay
from tests.support.postgres import fresh_database
from tests.support.racer import race_in
from tests.support.tools import held_running, marks, release
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]
ALLOW = {"allow": ["bump"]}
UNAVAILABLE = "audit ledger is unavailable"
READ_ROWS = {"decision", "started", "finished"}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture(params=["sqlite", "postgres"], scope="module")
def ledger_stack(request, tmp_path_factory, user_settings):
    home = tmp_path_factory.mktemp(f"faults-ledger-{request.param}")
    if request.param == "sqlite":
        with FaultStack(home, user_settings=user_settings) as stack:
            yield stack
        return
    url = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TOOLRUN_TEST_POSTGRES_URL not set: the PostgreSQL relay test is skipped")
    with fresh_database(url) as database_url:
        relay, through = Relay.in_front_of(database_url)
        stack = FaultStack(home, user_settings=user_settings, database_url=through, relay=relay)
        try:
            with stack:
                yield stack
        finally:
            relay.close()


@pytest.fixture
def ledger_runtime(ledger_stack):
    with ledger_stack.client() as runtime:
        yield ledger_stack, runtime


class Cut:
    """The ledger cut from now until `end()` (at most `longest` seconds), held by a thread."""

    def __init__(self, stack: FaultStack, longest: float = 20.0) -> None:
        self._holding, self._release = threading.Event(), threading.Event()
        self.seconds = 0.0

        def hold() -> None:
            with stack.ledger_cut():
                began = time.monotonic()
                self._holding.set()
                self._release.wait(longest)
                self.seconds = time.monotonic() - began

        self._thread = threading.Thread(target=hold, daemon=True)
        self._thread.start()
        assert self._holding.wait(10), "the ledger could not be cut"

    def end(self) -> float:
        self._release.set()
        self._thread.join(timeout=15)
        return self.seconds


def rows_settle(runtime, batch_id: str, expected: dict[str, set[str]], timeout: float = 60):
    """Wait until every call has at least its expected event kinds; the events by call."""
    deadline = time.monotonic() + timeout
    while True:
        kinds: dict[str, set[str]] = {}
        for event in runtime.ledger.events(batch_id):
            kinds.setdefault(event.call_id, set()).add(event.kind)
        if all(want <= kinds.get(call_id, set()) for call_id, want in expected.items()):
            return kinds
        assert time.monotonic() < deadline, f"rows missing: {kinds} (expected {expected})"
        time.sleep(0.2)


def test_a_ledger_cut_mid_batch_stops_side_effects_and_loses_no_row(
    ledger_runtime, workspace, request
):
    stack, runtime = ledger_runtime
    request.addfinalizer(lambda: release(workspace, "first"))
    batch = [  # the first two reads run until the ledger is cut: the cut comes mid-batch
        call("r0", "held", label="first"),
        call("r1", "held", label="first"),
        call("w1", "bump", label="w1"),
        call("r2", "nap", label="r2", seconds=0.2),
        call("w2", "bump", label="w2"),
        call("r3", "nap", label="r3"),
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=40
    )
    held_running(workspace, 2)  # a read's rows land when it ends: wait for the reads themselves
    cut, results = Cut(stack), {}
    release(workspace, "first")
    for result in handle.stream(timeout=45):  # the ledger is back once w2 has ended
        results[result.call_id] = result
        if result.call_id == "w2":
            assert cut.end() < 15
    cut.end()

    for effect in ("w1", "w2"):
        assert results[effect].status is Status.error, results[effect].model_message
        assert UNAVAILABLE in results[effect].model_message
    assert all(results[r].ok for r in ("r0", "r1", "r2", "r3"))
    assert marks(workspace, "effects") == []

    expected = {r: READ_ROWS for r in ("r0", "r1", "r2", "r3")}
    expected |= {w: {"decision", "finished"} for w in ("w1", "w2")}
    kinds = rows_settle(runtime, handle.batch_id, expected)
    assert "started" not in kinds["w1"] | kinds["w2"]
    calls = {row.call_id: row for row in runtime.ledger.calls(handle.batch_id)}
    assert {c: calls[c].status for c in calls} == {
        "r0": "ok",
        "r1": "ok",
        "w1": "error",
        "r2": "ok",
        "w2": "error",
        "r3": "ok",
    }
    assert calls["w1"].error_kind == "ledger"
    events = runtime.ledger.events(handle.batch_id)
    assert Counter((e.call_id, e.kind) for e in events if e.kind != "retried") == Counter(
        {(c, k) for c, want in kinds.items() for k in want}
    ), "a buffered row was written twice"


def test_a_batch_submitted_while_the_ledger_is_cut_runs_its_reads_only(ledger_runtime, workspace):
    stack, runtime = ledger_runtime
    cut = Cut(stack)
    batch = [
        call("r0", "nap", label="r0"),
        call("w1", "bump", label="w1"),
        call("r1", "nap", label="r1"),
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=40
    )
    results = {r.call_id: r for r in handle.results(timeout=45)}
    assert cut.end() < 15

    assert results["w1"].status is Status.error and UNAVAILABLE in results["w1"].model_message
    assert results["r0"].ok and results["r1"].ok
    assert marks(workspace, "effects") == []
    rows_settle(
        runtime, handle.batch_id, {"r0": READ_ROWS, "r1": READ_ROWS, "w1": {"decision", "finished"}}
    )
    # the call rows, written late, take the ends already recorded
    want = {"r0": "ok", "w1": "error", "r1": "ok"}

    def rows():
        return {row.call_id: row.status for row in runtime.ledger.calls(handle.batch_id)}

    wait_for(lambda: rows() == want, 10, f"call rows {want}", every=0.2)
    assert runtime.ledger.batch(handle.batch_id) is not None


@pytest.mark.timeout(300)
def test_a_batch_submitted_while_the_ledger_is_cut_and_redis_is_down_runs_once(
    ledger_runtime, workspace, monkeypatch
):
    """A Redis restart overlapping a ledger cut (as the soak's injector makes
    them): a submit meanwhile does not raise, since its batch still runs (a
    caller told it failed would submit it again). Once both are back its reads
    end ok, each run once, its side effect ends unrun (failed closed), and
    its rows land. The three ways a submit goes without the ledger: a keyed
    batch of reads, one sent before it is recorded, one with a side effect."""
    stack, runtime = ledger_runtime
    # Redis stays down past every submit's wait for it (the next test waits it out).
    monkeypatch.setattr(first_send, "PATIENCE", 0.5)
    options = {
        "mode": "auto",
        "workspace": workspace,
        "rules": ALLOW,
        "on_error": "continue",
        "timeout": 150,
    }
    batches = {
        "keyed": ([call("k0", "nap", label="k0")], {"key": f"down-{uuid.uuid4().hex}"}),
        "unkeyed": ([call("u0", "nap", label="u0")], {}),
        "effect": ([call("e0", "nap", label="e0"), call("w1", "bump", label="w1")], {}),
    }
    cut, handles = Cut(stack, longest=150), {}
    try:
        with stack.redis_down():
            for name, (calls, more) in batches.items():
                handles[name] = runtime.submit(calls, **options, **more)
    finally:
        cut.end()

    results = {}
    for handle in handles.values():
        results |= {r.call_id: r for r in handle.results(timeout=150)}
    assert all(results[r].ok for r in ("k0", "u0", "e0")), results
    assert results["w1"].status is Status.error and UNAVAILABLE in results["w1"].model_message
    assert marks(workspace, "effects") == []
    settled = {
        "keyed": {"k0": READ_ROWS},
        "unkeyed": {"u0": READ_ROWS},
        "effect": {"e0": READ_ROWS, "w1": {"decision", "finished"}},
    }
    for name, handle in handles.items():
        rows_settle(runtime, handle.batch_id, settled[name], timeout=120)
        assert runtime.ledger.batch(handle.batch_id) is not None
    starts = Counter(m["label"] for m in marks(workspace, "starts"))
    assert starts == {"k0": 1, "u0": 1, "e0": 1}, "a read ran more than once"


@pytest.mark.timeout(300)
def test_a_submit_waits_out_a_redis_restart_while_the_ledger_is_cut(
    ledger_runtime, workspace, monkeypatch, caplog
):
    """Redis comes back while a submit without the ledger waits for it: the
    submit keeps the batch's record there and sends its reads itself, so they
    run before the ledger is back (the sweep could not send them yet)."""
    stack, runtime = ledger_runtime
    monkeypatch.setattr(first_send, "PATIENCE", 120.0)  # Redis is back well before
    batch = [call("r0", "nap", label="r0"), call("w1", "bump", label="w1")]
    cut = Cut(stack, longest=150)
    try:
        with ThreadPoolExecutor(1) as pool, stack.redis_down():
            submit = pool.submit(
                runtime.submit,
                batch,
                mode="auto",
                workspace=workspace,
                rules=ALLOW,
                on_error="continue",
                timeout=150,
            )
            buffered = time.monotonic() + 60  # the submit found the ledger away
            while not any("its rows wait" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < buffered and not submit.done(), submit
                time.sleep(0.02)
        handle = submit.result(timeout=120)
        results = {r.call_id: r for r in handle.results(timeout=60)}  # the ledger still cut
    finally:
        cut.end()

    assert results["r0"].ok, results["r0"].model_message
    assert results["w1"].status is Status.error and UNAVAILABLE in results["w1"].model_message
    assert marks(workspace, "effects") == []
    rows_settle(runtime, handle.batch_id, {"r0": READ_ROWS, "w1": {"decision", "finished"}})
    assert runtime.ledger.batch(handle.batch_id) is not None
    assert [m["label"] for m in marks(workspace, "starts")] == ["r0"]


def test_racing_submitters_of_one_key_while_the_ledger_is_cut_accept_one_batch(
    ledger_stack, workspace, tmp_path
):
    """With the ledger away, the record the first racer keeps in Redis is the
    key's compare-and-set: the racers with its rules attach to its batch, the
    others are refused with KeyConflict, and no racer's reads run again."""
    stack = ledger_stack
    spec = {
        "calls": [call("r0", "nap", label="r0"), call("w1", "bump", label="w1")],
        "mode": "auto",
        "workspace": str(workspace),
        "on_error": "continue",
        "timeout": 40,
        "key": f"cut-race-{uuid.uuid4().hex}",
    }
    specs = [{**spec, "rules": ALLOW}, {**spec, "rules": {"deny": ["bump"]}}] * 2
    cuts: list[Cut] = []  # from when every racer has its Runtime (which needs the ledger)
    try:
        start = tmp_path / "start"
        outcomes = race_in(stack.client_env(), specs, start, ready=lambda: cuts.append(Cut(stack)))
    finally:
        for cut in cuts:
            cut.end()
    accepted = [s["rules"] for s, o in zip(specs, outcomes, strict=True) if "batch_id" in o]
    refused = [o for o in outcomes if "batch_id" not in o]
    assert len({o["batch_id"] for o in outcomes if "batch_id" in o}) == 1, outcomes
    assert len(accepted) == 2 and accepted[0] == accepted[1], outcomes
    assert [o.get("error") for o in refused] == ["KeyConflict", "KeyConflict"], outcomes
    (batch_id,) = {o["batch_id"] for o in outcomes if "batch_id" in o}
    with stack.client() as runtime:
        results = {r.call_id: r for r in runtime.attach(batch_id).results(timeout=45)}
    closed = Status.error if accepted[0] == ALLOW else Status.denied  # failed closed, or denied
    assert results["r0"].ok and results["w1"].status is closed
    starts = [m for m in marks(workspace, "starts") if m["label"] == "r0"]
    assert len(starts) == 1, "a racer ran the batch's read again"
    assert marks(workspace, "effects") == []


def test_a_row_the_database_refuses_does_not_hold_back_the_rows_after_it(tmp_path):
    """An outage keeps rows for later; a row the database will never take (a
    value it cannot store) is logged and dropped, or every later row would wait
    behind it for ever."""
    from runtime.errors import LedgerRefused, LedgerUnavailable
    from runtime.ledger.buffer import LedgerBuffer

    written, outage = [], [True]

    def refused() -> None:
        raise LedgerRefused("DataError: a value the database cannot store")

    def row(name: str):
        def write() -> None:
            if outage[0]:
                raise LedgerUnavailable("down")
            written.append(name)

        return write

    buffer = LedgerBuffer(interval=0.05)
    assert not buffer.write(row("first"))
    buffer.keep(refused)
    buffer.keep(row("last"))
    assert not buffer.flush() and len(buffer) == 3
    outage[0] = False
    wait_for(lambda: len(buffer) == 0, 5, "flush of the buffer")
    assert written == ["first", "last"]


def test_call_rows_written_late_take_what_workers_recorded_first(tmp_path):
    """After a cut the client's buffer and a worker's flush in any order: a
    worker's started and finished rows may land before the batch's own rows."""
    from runtime.ledger.store import Ledger
    from runtime.results import formatter as results
    from runtime.types import Batch, ToolCall

    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        batch = Batch(calls=[ToolCall(id="r", name="nap"), ToolCall(id="q", name="nap")])
        ledger.mark_started(batch.id, "r", worker="reads-1", attempt=1)
        done = results.success("r", "nap", "slept", max_bytes=1024, worker="reads-1", attempts=1)
        ledger.record_result(batch.id, done)
        ledger.mark_started(batch.id, "q", worker="reads-2", attempt=1)
        ledger.record_batch(batch)
        calls = {row.call_id: row for row in ledger.calls(batch.id)}
        assert (calls["r"].status, calls["r"].worker, calls["r"].summary) == (
            "ok",
            "reads-1",
            "nap: slept",
        )
        assert calls["r"].started_at and calls["r"].finished_at
        assert (calls["q"].status, calls["q"].worker) == ("running", "reads-2")
    finally:
        ledger.close()
