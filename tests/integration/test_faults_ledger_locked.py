"""The ledger locked by another process, as an operator's `sqlite3 ledger.db`
with `BEGIN EXCLUSIVE` open locks it (PostgreSQL, with TOOLRUN_TEST_POSTGRES_URL:
the migrators' lock and every table in EXCLUSIVE mode): processes still start
and run reads, side effects fail closed, and a batch submitted meanwhile lands
afterwards with its key, plan and deadline, and ends (docs/architecture.md,
"The ledger")."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlmodel import select

from runtime.ledger.tables import BatchRow, EndRow
from runtime.types import Status
from tests.support import submitter
from tests.support.faults import FaultStack
from tests.support.ledger_lock import held_elsewhere
from tests.support.postgres import fresh_database
from tests.support.tools import held_running, release
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]


def ended(read: Callable[[], BatchRow | None], timeout: float = 60) -> BatchRow:
    """The batch row `read()` gives once the ledger has it marked ended."""

    def marked() -> BatchRow | None:
        row = read()
        return row if row is not None and row.ended_at is not None else None

    return wait_for(marked, timeout, "batch row marked ended", every=0.2)


ALLOW = {"allow": ["bump"]}
TIMEOUT = 40.0  # the batches' own timeout: their deadline


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


LEDGERS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@contextmanager
def fault_stack(kind: str, home: Path, user_settings: Path, **settings) -> Iterator[FaultStack]:
    if kind == "sqlite":
        with FaultStack(home, user_settings=user_settings, **settings) as stack:
            yield stack
        return
    url = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TOOLRUN_TEST_POSTGRES_URL not set: the locked PostgreSQL ledger is skipped")
    with fresh_database(url) as database_url:
        with FaultStack(
            home, user_settings=user_settings, database_url=database_url, **settings
        ) as stack:
            yield stack


@pytest.fixture(scope="module", params=LEDGERS)
def module_stack(request, tmp_path_factory, user_settings):
    """One stack per kind of ledger for the module: each test locks the ledger
    for itself, with its own workspace, batches and keys."""
    home = tmp_path_factory.mktemp(f"faults-locked-{request.param}")
    with fault_stack(request.param, home, user_settings) as stack:
        yield stack


@pytest.fixture
def locked_stack(module_stack):
    """The module's stack with a live worker per queue (a test may have killed some)."""
    for queue in ("reads", "effects"):
        if not module_stack.workers(queue):
            module_stack.add_worker(queue)
    return module_stack


@pytest.fixture(params=LEDGERS)
def impatient_stack(request, tmp_path_factory, user_settings):
    """A stack of its own whose advancers write an announced end the ledger
    lacks after 1 s, not 10, and whose sweep looks at a batch 3 s old, not 15."""
    home = tmp_path_factory.mktemp(f"faults-impatient-{request.param}")
    quick = {"unrecorded_patience": 1.0, "resend_after": 3.0}
    with fault_stack(request.param, home, user_settings, **quick) as stack:
        yield stack


def test_a_process_and_a_worker_start_and_run_reads_while_the_ledger_is_locked(
    locked_stack, workspace
):
    stack = locked_stack
    spec = {
        "calls": [call("r0", "nap", label="r0"), call("r1", "nap", label="r1")],
        "mode": "auto",
        "workspace": str(workspace),
        "timeout": TIMEOUT,
    }
    with held_elsewhere(stack.settings.ledger_url):
        old = stack.workers("reads")
        stack.add_worker("reads")  # a worker process starting now
        for worker in old:
            stack.kill_worker(worker)  # so the new one runs the reads
        done = submitter.run(stack, spec, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    batch_id, statuses = done.stdout.splitlines()
    assert json.loads(statuses) == {"r0": "ok", "r1": "ok"}


def test_a_keyed_batch_submitted_while_the_ledger_is_locked_keeps_its_key_and_ends(
    locked_stack, workspace
):
    """Its reads run and its side effect fails closed; once the lock is gone
    its rows land with the key, the plan and the deadline, the sweep marks
    it ended at its last end's time, and the same key and calls attach."""
    stack = locked_stack
    key = f"locked-{uuid.uuid4().hex}"
    calls = [
        call("r0", "nap", label="r0"),
        call("w1", "bump", label="w1"),
        call("r1", "nap", label="r1"),
    ]
    options = {
        "mode": "auto",
        "workspace": workspace,
        "rules": ALLOW,
        "on_error": "continue",
        "timeout": TIMEOUT,
        "key": key,
    }
    with stack.client() as runtime:
        with held_elsewhere(stack.settings.ledger_url):
            started = time.time()
            handle = runtime.submit(calls, **options)
            returned = time.time()
            results = {r.call_id: r for r in handle.results(timeout=30)}
        assert {c: r.status.value for c, r in results.items()} == {
            "r0": "ok",
            "w1": "error",
            "r1": "ok",
        }
        assert "audit ledger is unavailable" in results["w1"].model_message

        row = ended(lambda: runtime.ledger.batch(handle.batch_id))  # the buffer's flush, the sweep
        assert row.key == key and row.fingerprint is not None
        # The deadline the submitter set (a busy machine may take long to start it).
        assert started + TIMEOUT - 1 <= row.deadline_at.timestamp() <= returned + TIMEOUT + 1
        assert set(runtime.ledger.ends(handle.batch_id)) == {"r0", "w1", "r1"}
        query = select(EndRow.at).where(EndRow.batch_id == handle.batch_id)
        ends = runtime.ledger.transaction(lambda s: list(s.exec(query).all()), write=False)
        assert row.ended_at == max(ends)

    with stack.client() as other:  # the same key and calls, from another client
        again = other.submit(calls, **options)
        assert again.batch_id == handle.batch_id
        found = {r.call_id: r.status.value for r in again.results(timeout=10)}
    assert found == {c: r.status.value for c, r in results.items()}


def test_a_batch_whose_submitter_dies_while_the_ledger_is_locked_still_lands_and_ends(
    locked_stack, workspace
):
    """The submitter hands its batch's record to the cluster before `submit`
    returns; killed before the lock goes, it takes nothing with it: the sweep
    writes the record (key, plan, deadline) and the batch ends."""
    stack = locked_stack
    key = f"orphan-{uuid.uuid4().hex}"
    spec = {
        "calls": [call("r0", "nap", label="r0"), call("w1", "bump", label="w1")],
        "mode": "auto",
        "workspace": str(workspace),
        "rules": ALLOW,
        "on_error": "continue",
        "timeout": TIMEOUT,
        "key": key,
    }
    with held_elsewhere(stack.settings.ledger_url):
        started = time.time()
        process, batch_id = submitter.spawn(stack, spec)
        returned = time.time()  # the submitter printed the id: `submit` had returned
        process.kill()
        process.wait(timeout=10)
        assert batch_id, "the submitter printed no batch id"

    with stack.client() as runtime:
        row = ended(lambda: runtime.ledger.batch(batch_id))  # the sweep writes it, then ends it
        assert row.key == key and row.fingerprint is not None
        # The deadline the submitter set (a busy machine may take long to start it).
        assert started + TIMEOUT - 1 <= row.deadline_at.timestamp() <= returned + TIMEOUT + 1
        ends = runtime.ledger.ends(batch_id)
        assert {c: r.status.value for c, r in ends.items()} == {"r0": "ok", "w1": "error"}
        decisions = [e.call_id for e in runtime.ledger.events(batch_id) if e.kind == "decision"]
        assert sorted(decisions) == ["r0", "w1"]
        again = runtime.submit(spec["calls"], **{k: v for k, v in spec.items() if k != "calls"})
        assert again.batch_id == batch_id


@pytest.mark.timeout(300)
def test_a_read_whose_row_died_with_its_worker_gets_its_announced_end_in_the_ledger(
    impatient_stack, workspace, request
):
    """A read ends while the ledger is locked: its end reaches the caller and
    its row waits in the pool process's buffer; the worker is killed before the
    lock goes, and the row with it. Once the ledger is back, the advancer writes
    the announced end (after its patience) and the batch ends, with the status
    the caller got (docs/architecture.md, "The ledger")."""
    stack = impatient_stack
    request.addfinalizer(lambda: release(workspace, "kept"))
    with stack.client() as runtime:
        handle = runtime.submit(
            [call("r1", "held", label="kept")], mode="auto", workspace=workspace, timeout=240
        )
        held_running(workspace, 1, bound=60)
        with held_elsewhere(stack.settings.ledger_url):
            release(workspace, "kept")
            [result] = handle.results(timeout=60)  # announced while the ledger is locked
            assert result.status is Status.ok, result.model_message
            for worker in stack.workers("reads"):
                stack.kill_worker(worker)  # and the row its pool process kept
        stack.add_worker("reads")
        ended(lambda: runtime.ledger.batch(handle.batch_id), timeout=180)
        ends = runtime.ledger.ends(handle.batch_id)
        assert {c: r.status for c, r in ends.items()} == {"r1": Status.ok}


def test_attaching_to_a_batch_whose_record_waits_in_redis_lands_it(locked_stack, workspace):
    """A batch submitted while the ledger was locked, its submitter killed: its
    record waits in Redis for the sweep. With no worker alive to sweep, `attach`
    once the lock goes writes the record itself and follows the batch (before,
    it said the batch did not exist)."""
    stack = locked_stack
    spec = {
        "calls": [call("r0", "nap", label="r0")],
        "mode": "auto",
        "workspace": str(workspace),
        "timeout": TIMEOUT,
    }
    with held_elsewhere(stack.settings.ledger_url):
        for queue in ("reads", "effects"):
            for worker in stack.workers(queue):
                stack.kill_worker(worker)  # no sweep to write the kept record
        process, batch_id = submitter.spawn(stack, spec)
        process.kill()
        process.wait(timeout=10)
        assert batch_id, "the submitter printed no batch id"
    with stack.client() as runtime:
        handle = runtime.attach(batch_id)
        assert runtime.ledger.batch(batch_id) is not None
        for queue in ("reads", "effects"):
            stack.add_worker(queue)
        assert [r.status for r in handle.results(timeout=90)] == [Status.ok]


def test_a_batch_of_reads_whose_submitter_dies_between_send_and_record_lands_and_ends(
    locked_stack, workspace, request
):
    """A batch of allowed reads with no key is sent before its record is
    written (docs/architecture.md, "Sent before recorded"). Its submitter,
    killed while its read runs and its record write waits for the lock, has
    not returned from `submit`; the record it kept in Redis before sending is
    written by the sweep once the lock goes, with the read's decision and its
    end, and the batch ends."""
    stack = locked_stack
    request.addfinalizer(lambda: release(workspace, "orphan"))
    spec = {
        "calls": [call("r0", "held", label="orphan")],
        "mode": "auto",
        "workspace": str(workspace),
        "timeout": TIMEOUT,
    }
    with held_elsewhere(stack.settings.ledger_url):
        # The record's write waits out the lock for as long as the test needs.
        process = submitter.start(stack, spec, env={"TOOLRUN_LEDGER_RETRY_SECONDS": "120"})
        out = submitter.lines(process)
        assert out.get(timeout=60) == submitter.READY, submitter.last_words(process)
        held_running(workspace, 1, bound=60)  # sent: a worker runs the read
        assert out.empty(), "submit returned before its record was written"
        process.kill()
        process.wait(timeout=10)
        release(workspace, "orphan")

    with stack.client() as runtime:
        query = select(BatchRow).where(BatchRow.workspace == str(workspace))
        # the sweep writes it, then marks it ended
        row = ended(
            lambda: runtime.ledger.transaction(lambda s: s.exec(query).first(), write=False)
        )
        ends = runtime.ledger.ends(row.id)
        assert {c: r.status.value for c, r in ends.items()} == {"r0": "ok"}
        kinds = [(e.call_id, e.kind) for e in runtime.ledger.events(row.id)]
        assert ("r0", "decision") in kinds and ("r0", "finished") in kinds
        assert [c.status for c in runtime.ledger.calls(row.id)] == ["ok"]
        # its unredacted copy goes too
        wait_for(lambda: runtime._transport.plan(row.id) is None, 60, "drop of the plan's copy")
