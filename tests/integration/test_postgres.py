"""The ledger on PostgreSQL through real workers: a second embedded stack whose
workers and client write to a fresh PostgreSQL database, never to SQLite.

Runs when TOOLRUN_TEST_POSTGRES_URL names a server we may create databases on.
"""

from __future__ import annotations

import os

import pytest

from runtime.settings import Settings
from runtime.types import Status
from tests.conftest import runtime_on
from tests.support.postgres import fresh_database
from tests.support.tools import marks

POSTGRES_ENV = "TOOLRUN_TEST_POSTGRES_URL"
TEST_TOOLS = "tests.support.tools"
RAN = {"r1": "reads", "r2": "reads", "w1": "effects", "wf": "effects", "rf": "reads"}
REFUSED = {
    "u": ("lookup_failed", "unknown_tool"),
    "bad": ("invalid_arguments", "invalid_arguments"),
    "d": ("decision", "denied"),
}

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


def call(call_id, name, **arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture(scope="module")
def postgres_stack(tmp_path_factory):
    """A fresh database and a stack of its own (own Redis, reads and effects
    workers) whose ledger is that database; stopped before the database is dropped."""
    from runtime.stack.embedded import start_stack, stop_stack

    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} not set: PostgreSQL tests skipped")
    with fresh_database(url) as database_url:
        home = tmp_path_factory.mktemp("toolrun-postgres-home")
        settings = Settings(
            home=home, redis_url=None, database_url=database_url, tool_modules=TEST_TOOLS
        )
        try:
            yield start_stack(
                settings, flower=False, extra_env={"TOOLRUN_TOOL_MODULES": TEST_TOOLS}
            )
        finally:
            stop_stack(home)


# Auto mode runs side effects only where a rule allows them.
WRITES = {"allow": ["bump", "write_file"]}


@pytest.fixture(scope="module")
def postgres_runtime(postgres_stack, user_settings):
    rt = runtime_on(postgres_stack, user_settings)
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def ran(postgres_runtime, tmp_path_factory):
    """One mixed batch, run to its end: reads, writes, a read of a write, and
    an unknown, an invalid and a denied call."""
    workspace = tmp_path_factory.mktemp("workspace")
    batch = [
        call("r1", "nap", label="a", seconds=0.2),
        call("r2", "nap", label="b", seconds=0.2),
        call("w1", "bump", label="counted"),
        call("wf", "write_file", path="notes.txt", content="kept in postgres"),
        call("rf", "read_file", path="notes.txt"),
        call("u", "ghost_tool", x=1),
        call("bad", "bump", label=None),
        call("d", "obliterate", label="never"),
    ]
    handle = postgres_runtime.submit(
        batch, mode="auto", workspace=workspace, on_error="continue", rules=WRITES
    )
    results = {result.call_id: result for result in handle.results(timeout=60)}
    ledger = postgres_runtime.ledger
    return {
        "workspace": workspace,
        "results": results,
        "batch": ledger.batch(handle.batch_id),
        "calls": {row.call_id: row for row in ledger.calls(handle.batch_id)},
        "events": ledger.events(handle.batch_id),
    }


def test_the_stack_writes_its_ledger_to_postgresql_only(postgres_stack, postgres_runtime, ran):
    assert postgres_stack.database_url.startswith("postgresql")
    assert postgres_runtime.settings.ledger_url == postgres_stack.database_url
    assert not (postgres_stack.home / "ledger.db").exists()
    assert ran["batch"] is not None
    assert (ran["batch"].mode, ran["batch"].call_count) == ("auto", 8)


def test_the_batch_ran_as_on_any_ledger(ran):
    statuses = {call_id: result.status for call_id, result in ran["results"].items()}
    assert statuses == {
        **dict.fromkeys(RAN, Status.ok),
        "u": Status.unknown_tool,
        "bad": Status.invalid_arguments,
        "d": Status.denied,
    }
    assert "kept in postgres" in ran["results"]["rf"].content["text"]
    assert [mark["label"] for mark in marks(ran["workspace"], "effects")] == ["counted"]


def test_each_call_that_ran_has_a_decision_a_started_and_a_finished_row(postgres_stack, ran):
    workers = {worker["name"]: worker["queue"] for worker in postgres_stack.workers}
    for call_id, queue in RAN.items():
        rows = [event for event in ran["events"] if event.call_id == call_id]
        assert [row.kind for row in rows] == ["decision", "started", "finished"], call_id
        decision, started, finished = rows
        assert (decision.effect, decision.mode) == ("allow", "auto")
        assert decision.rule in ("mode:auto", *WRITES["allow"]) and decision.policy_version
        assert finished.status == "ok"
        assert finished.worker and workers.get(finished.worker) == queue, finished.worker
        assert started.worker == finished.worker
        assert decision.at <= started.at <= finished.at


def test_each_refused_call_has_one_end_row(ran):
    for call_id, (kind, status) in REFUSED.items():
        rows = [event for event in ran["events"] if event.call_id == call_id]
        assert [(row.kind, row.status, row.mode) for row in rows] == [(kind, status, "auto")]
    [denied] = [event for event in ran["events"] if event.call_id == "d"]
    assert (denied.effect, denied.rule) == ("deny", "mode:auto")


def test_call_rows_hold_final_statuses_and_the_worker_that_ran_them(ran):
    calls, events = ran["calls"], ran["events"]
    assert list(calls) == ["r1", "r2", "w1", "wf", "rf", "u", "bad", "d"]
    assert {call_id: row.status for call_id, row in calls.items()} == {
        **dict.fromkeys(RAN, "ok"),
        **{call_id: status for call_id, (_kind, status) in REFUSED.items()},
    }
    finished = {event.call_id: event for event in events if event.kind == "finished"}
    for call_id in RAN:
        row = calls[call_id]
        assert row.worker == finished[call_id].worker and row.attempts == 1
        assert row.started_at is not None and row.finished_at >= row.started_at
    for call_id in REFUSED:
        assert calls[call_id].worker is None and calls[call_id].finished_at is not None
