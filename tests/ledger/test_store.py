"""The audit ledger against real databases: a SQLite file always, PostgreSQL when
TOOLRUN_TEST_POSTGRES_URL names a server we may create databases on."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, exc, text
from sqlalchemy.engine import make_url

from runtime.errors import InvalidBatch, LedgerUnavailable
from runtime.ledger.ends import CallEnd
from runtime.ledger.store import EventKind, EventRow, Ledger, Recorded
from runtime.ledger.tables import utc_now
from runtime.settings import Settings
from runtime.types import Batch, ErrorInfo, Mode, Risk, Status, ToolCall, ToolResult
from tests.support.postgres import fresh_database

POSTGRES_ENV = "TOOLRUN_TEST_POSTGRES_URL"
ANTHROPIC_KEY = "sk-ant-api03-" + "abcdefghijklmnopqrstuvwxyzabcd"
DSN = "postgres://u:hunter2@h/db"
SECRETS = (ANTHROPIC_KEY, "hunter2", "plain-field-secret")


def _postgres_url_or_skip() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} not set: PostgreSQL ledger tests skipped")
    return url


@pytest.fixture(scope="session")
def postgres_database():
    with fresh_database(_postgres_url_or_skip()) as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'not-yet' / 'ledger.db'}"  # the ledger makes the dir
    return request.getfixturevalue("postgres_database")


@pytest.fixture
def ledger(ledger_url):
    ledger = Ledger(ledger_url)
    yield ledger
    ledger.close()


def _batch(*ids: str, **fields) -> Batch:
    return Batch(
        calls=[ToolCall(id=i, name=f"tool_{i}", arguments={"n": i}) for i in ids], **fields
    )


def _result(call_id: str, status: Status = Status.ok, **fields) -> ToolResult:
    fields = {"model_message": "done", "summary": f"{call_id} done", **fields}
    return ToolResult(call_id=call_id, tool=f"tool_{call_id}", status=status, **fields)


def _dump(url: str) -> str:
    """Every stored value as text, read around the ledger's own code."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            tables = ("toolrun_batch", "toolrun_call", "toolrun_event")
            rows = [connection.execute(text(f"SELECT * FROM {t}")).all() for t in tables]
    finally:
        engine.dispose()
    return repr(rows)


def test_round_trip(ledger):
    batch = _batch("a", "b", mode=Mode.auto, workspace="/srv/work", on_error="continue")
    before = datetime.now(UTC) - timedelta(seconds=5)
    ledger.record_batch(batch, risks={"a": Risk.read, "b": None}, policy_version="p1")
    ledger.record_event(
        batch.id,
        "a",
        EventKind.decision,
        mode=Mode.auto,
        effect="allow",
        rule="read-*",
        reason="reads are allowed",
        policy_version="p1",
    )
    ledger.mark_started(batch.id, "a", worker="w1@host", attempt=1)
    ledger.record_result(batch.id, _result("a", duration_ms=12.5, worker="w1@host", attempts=1))

    row = ledger.batch(batch.id)
    assert (row.mode, row.workspace, row.on_error, row.call_count, row.policy_version) == (
        "auto",
        "/srv/work",
        "continue",
        2,
        "p1",
    )
    assert row.created_at.tzinfo is not None and row.created_at >= before
    a, b = ledger.calls(batch.id)
    assert (a.call_id, a.tool, a.risk, a.status, a.arguments) == (
        "a",
        "tool_a",
        "read",
        "ok",
        {"n": "a"},
    )
    assert (a.worker, a.attempts, a.duration_ms, a.summary) == ("w1@host", 1, 12.5, "a done")
    assert a.started_at <= a.finished_at and a.started_at.utcoffset() == timedelta(0)
    assert (b.status, b.risk, b.started_at, b.finished_at) == ("pending", None, None, None)

    events = ledger.events(batch.id)
    assert [e.kind for e in events] == ["decision", "started", "finished"]
    assert all(type(e.kind) is str and e.at.tzinfo is not None for e in events)
    decision, started, finished = events
    assert (decision.mode, decision.effect, decision.rule, decision.policy_version) == (
        "auto",
        "allow",
        "read-*",
        "p1",
    )
    assert (started.worker, started.attempt) == ("w1@host", 1)
    assert (finished.status, finished.attempt, finished.worker) == ("ok", 1, "w1@host")
    assert finished.detail == {"summary": "a done", "error": None, "duration_ms": 12.5}
    assert ledger.batch("no-such-batch") is None


def test_secrets_are_stored_redacted(ledger, ledger_url):
    arguments = {
        "command": f"curl -H 'x-api-key: {ANTHROPIC_KEY}' https://example.com",
        "env": {"DATABASE_URL": DSN},
        "api_key": "plain-field-secret",
        "argv": [ANTHROPIC_KEY],
    }
    batch = Batch(calls=[ToolCall(id="c", name="bash", arguments=arguments)])
    ledger.record_batch(batch)
    ledger.record_event(
        batch.id,
        "c",
        EventKind.approval_asked,
        reason=f"connects to {DSN}",
        detail={"dsn": DSN, "nested": [{"token": "plain-field-secret"}], "key": ANTHROPIC_KEY},
    )
    ledger.record_many([EventRow(batch_id=batch.id, call_id="c", kind="retried", detail=DSN)])
    error = ErrorInfo(kind="RuntimeError", message=f"auth failed for {DSN}")
    ledger.record_result(
        batch.id, _result("c", Status.error, summary=f"used {ANTHROPIC_KEY}", error=error)
    )

    stored = _dump(ledger_url)
    for secret in SECRETS:
        assert secret not in stored
    assert "[REDACTED:anthropic_key]" in stored and "[REDACTED:url_password]" in stored
    (call,) = ledger.calls(batch.id)
    assert call.arguments["api_key"] == "[REDACTED:api_key]"  # the marker names the field
    assert call.arguments["env"]["DATABASE_URL"] == "postgres://u:[REDACTED:url_password]@h/db"
    assert call.error_message == "auth failed for postgres://u:[REDACTED:url_password]@h/db"


def test_record_batch_is_idempotent(ledger):
    batch = _batch("a", "b")
    ledger.record_batch(batch, policy_version="first")
    ledger.record_result(batch.id, _result("a"))
    ledger.record_batch(batch, policy_version="second")
    assert ledger.batch(batch.id).policy_version == "first"
    assert [(c.call_id, c.status) for c in ledger.calls(batch.id)] == [
        ("a", "ok"),
        ("b", "pending"),
    ]


def test_recording_a_batch_again_writes_nothing(ledger):
    """The batch row's insert is the compare-and-set: the second recorder of
    an id (a racing submitter of one key) adds no decision and no end."""
    batch = _batch("a", "b")
    allow = EventRow(batch_id=batch.id, call_id="a", kind=EventKind.decision, effect="allow")
    assert ledger.record_batch(batch, events=[allow]) is Recorded.new
    ledger.mark_started(batch.id, "a", worker="w1", attempt=1)
    deny = EventRow(batch_id=batch.id, call_id="a", kind=EventKind.decision, effect="deny")
    refused = CallEnd(batch.id, _result("a", Status.denied), kind=EventKind.finished)
    assert ledger.record_batch(batch, events=[deny], ends=[refused]) is Recorded.found
    assert [(e.call_id, e.kind, e.effect) for e in ledger.events(batch.id)] == [
        ("a", "decision", "allow"),
        ("a", "started", None),
    ]
    assert ledger.ends(batch.id) == {}
    assert ledger.calls(batch.id)[0].status == "running"


def test_record_batch_refuses_repeated_call_ids(ledger):
    with pytest.raises(InvalidBatch):
        ledger.record_batch(_batch("a", "a"))


def test_record_batch_refuses_a_column_the_batch_row_lacks(ledger):
    """Its statements are built once and only bound: a column no statement
    would take is an error, not silently dropped."""
    batch = _batch("a")
    with pytest.raises(TypeError, match="no column submiter"):
        ledger.record_batch(batch, columns={"submiter": "me"})
    assert ledger.batch(batch.id) is None


def test_calls_come_in_position_order(ledger):
    batch = _batch("z", "a", "m", "b")
    ledger.record_batch(batch)
    calls = ledger.calls(batch.id)
    assert [(c.position, c.call_id) for c in calls] == [(0, "z"), (1, "a"), (2, "m"), (3, "b")]


def test_record_result_updates_the_call_row(ledger):
    batch = _batch("a", "b")
    ledger.record_batch(batch)
    ledger.mark_started(batch.id, "a", worker="w1", attempt=1)
    assert ledger.calls(batch.id)[0].status == "running"
    first_start = ledger.calls(batch.id)[0].started_at
    ledger.mark_started(batch.id, "a", worker="w2", attempt=2)
    error = ErrorInfo(kind="TimeoutError", message="took too long")
    result = _result("a", Status.timeout, error=error, duration_ms=30000.0, worker="w2", attempts=2)
    ledger.record_result(batch.id, result)
    ledger.record_result(batch.id, _result("b", Status.skipped), kind=EventKind.skipped)

    a, b = ledger.calls(batch.id)
    assert (a.status, a.error_kind, a.error_message) == ("timeout", "TimeoutError", "took too long")
    assert (a.duration_ms, a.worker, a.attempts, a.started_at) == (30000.0, "w2", 2, first_start)
    assert a.finished_at >= a.started_at
    assert (b.status, b.finished_at is not None, b.worker) == ("skipped", True, None)
    finished = ledger.events(batch.id, "a")[-1]
    assert finished.detail["error"] == {"kind": "TimeoutError", "message": "took too long"}
    assert [e.kind for e in ledger.events(batch.id, "b")] == ["skipped"]


def test_result_of_an_unrecorded_call_keeps_its_event(ledger):
    ledger.record_result("never-recorded", _result("x"))
    assert ledger.calls("never-recorded") == []
    assert [e.kind for e in ledger.events("never-recorded")] == ["finished"]


def test_record_many_is_one_transaction(ledger):
    rows = [
        EventRow(batch_id="b1", call_id="a", kind=EventKind.decision, effect="allow"),
        EventRow(batch_id="b1", call_id=None, kind=EventKind.cancelled, reason="user stopped it"),
    ]
    ledger.record_many(rows)
    assert [(e.call_id, e.kind) for e in ledger.events("b1")] == [
        ("a", "decision"),
        (None, "cancelled"),
    ]
    assert [e.kind for e in ledger.events("b1", "a")] == ["decision"]
    with pytest.raises(ValueError):
        ledger.record_many(
            [EventRow(batch_id="b2", kind="decision"), EventRow(batch_id="b2", kind="oops")]
        )
    assert ledger.events("b2") == []


def test_record_event_rejects_unknown_fields_and_kinds(ledger):
    with pytest.raises(TypeError, match="colour"):
        ledger.record_event("b", "a", EventKind.decision, colour="red")
    with pytest.raises(ValueError):
        ledger.record_event("b", "a", "finishd")
    assert ledger.events("b") == []


def test_from_settings_makes_the_sqlite_file_under_home(tmp_path):
    ledger = Ledger.from_settings(Settings(home=tmp_path / "home"))
    try:
        ledger.record_event("b", None, EventKind.cancelled)
    finally:
        ledger.close()
    assert (tmp_path / "home" / "ledger.db").is_file()


def _hammer(url: str, batch_id: str, worker: str, count: int, barrier=None) -> None:
    """Write `count` events and, every other one, a new batch (a read, then a
    write), with no retries: a "database is locked" would raise."""
    ledger = Ledger(url, retry_attempts=1)
    try:
        if barrier is not None:
            barrier.wait(timeout=60)
        for n in range(count):
            if n % 2:
                ledger.record_event(batch_id, worker, EventKind.retried, worker=worker, attempt=n)
                ledger.record_batch(_batch(f"{worker}-{n}"))
            else:
                ledger.mark_started(batch_id, worker, worker=worker, attempt=n)
    finally:
        ledger.close()


def test_concurrent_threads_all_land(ledger, ledger_url):
    batch = _batch("t0", "t1", "t2", "t3")
    ledger.record_batch(batch)
    errors = []

    def run(call_id: str) -> None:
        try:
            for n in range(50):
                if n % 2:
                    ledger.record_event(batch.id, call_id, EventKind.retried, attempt=n)
                else:
                    ledger.record_result(batch.id, _result(call_id, attempts=n, worker=call_id))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(c.id,)) for c in batch.calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    # 25 ends reported per call, one recorded: the first (docs/architecture.md, "One end per call")
    assert len(ledger.events(batch.id)) == 100 + 4
    assert {(c.worker, c.attempts) for c in ledger.calls(batch.id)} == {
        (c.id, 0) for c in batch.calls
    }


def test_the_first_end_of_a_call_wins_and_later_reporters_record_nothing(ledger):
    batch = _batch("a")
    ledger.record_batch(batch)
    assert ledger.record_result(batch.id, _result("a", worker="w1")) is True
    late = _result("a", worker="sweep").model_copy(update={"status": Status.timeout})
    assert ledger.record_result(batch.id, late) is False
    assert ledger.record_end(CallEnd(batch.id, late)) is False
    [row] = ledger.calls(batch.id)
    assert (row.status, row.worker) == ("ok", "w1")
    assert [e.status for e in ledger.events(batch.id) if e.status] == ["ok"]
    assert ledger.ends(batch.id)["a"].worker == "w1"


def test_an_end_recorded_before_its_batch_still_wins(ledger):
    batch = _batch("early")
    assert ledger.record_result(batch.id, _result("early", worker="fast")) is True
    ledger.record_batch(batch)
    assert ledger.record_result(batch.id, _result("early", worker="slow")) is False
    assert [c.worker for c in ledger.calls(batch.id)] == ["fast"]


def test_concurrent_processes_all_land(ledger, ledger_url):
    batch = _batch("p0", "p1", "main")
    ledger.record_batch(batch)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(3)
    processes = [
        context.Process(target=_hammer, args=(ledger_url, batch.id, f"p{i}", 100, barrier))
        for i in range(2)
    ]
    for process in processes:
        process.start()
    _hammer(ledger_url, batch.id, "main", 100, barrier)
    for process in processes:
        process.join(timeout=90)
    assert [p.exitcode for p in processes] == [0, 0]
    assert len(ledger.events(batch.id)) == 300
    assert {c.status for c in ledger.calls(batch.id)} == {"running"}


def test_unreachable_database_raises_ledger_unavailable():
    started = time.monotonic()
    with pytest.raises(LedgerUnavailable) as raised:
        Ledger("postgresql://u:hunter2@127.0.0.1:1/toolrun", retry_seconds=0.5)
    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert "postgresql+psycopg://u:***@127.0.0.1:1/toolrun" in message
    assert "OperationalError" in message and "hunter2" not in message
    assert isinstance(raised.value.__cause__, exc.OperationalError)


def test_writes_fail_closed_when_the_table_is_gone(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = Ledger(url, retry_seconds=0.5)
    try:
        engine = create_engine(url)
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE toolrun_event"))
        engine.dispose()
        with pytest.raises(LedgerUnavailable, match="no such table"):
            ledger.record_event("b", "a", EventKind.decision)
    finally:
        ledger.close()


@pytest.mark.postgres
def test_writes_fail_closed_when_the_database_is_gone():
    admin_url = _postgres_url_or_skip()
    with fresh_database(admin_url) as url:
        ledger = Ledger(url, retry_seconds=0.5)
        ledger.record_event("b", "a", EventKind.decision)
        driver = make_url(admin_url).set(drivername="postgresql+psycopg")
        admin = create_engine(driver, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            name = url.rsplit("/", 1)[1]
            connection.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.dispose()
        with pytest.raises(LedgerUnavailable):
            ledger.record_event("b", "a", EventKind.started)
        ledger.close()


def test_a_writer_kept_from_the_lock_fails_clearly_within_its_bound(ledger_url):
    """Another process holds the write lock (SQLite) or the batch's lock
    (PostgreSQL) and never lets go: a write ends with LedgerUnavailable naming
    the lock, within about its retry bound, and never hangs."""
    from runtime.ledger.rows import lock_batches

    ledger = Ledger(ledger_url, retry_seconds=1.0)
    batch = _batch("a")
    ledger.record_batch(batch)
    holder = create_engine(make_url(ledger_url).set(drivername=_driver(ledger_url)))
    try:
        with holder.connect() as connection:
            if connection.dialect.name == "sqlite":
                connection.exec_driver_sql("BEGIN EXCLUSIVE")
            else:
                connection.begin()
                lock_batches(connection, {batch.id})
            began = time.monotonic()
            with pytest.raises(LedgerUnavailable, match="held its write lock for over 1 s"):
                ledger.record_result(batch.id, _result("a"))
            assert time.monotonic() - began < 5.0
            connection.rollback()
    finally:
        holder.dispose()
        ledger.close()
    Ledger(ledger_url).record_result(batch.id, _result("a"))  # free again: it lands


def _driver(url: str) -> str:
    name = make_url(url).drivername
    return "postgresql+psycopg" if name.startswith("postgres") else name


def test_a_ledger_opens_and_reads_while_another_process_holds_the_write_lock(ledger_url):
    """Another process holds the write lock (`sqlite3` with BEGIN EXCLUSIVE; on
    PostgreSQL the migrators' lock and every table in EXCLUSIVE mode): a new
    `Ledger` on a database that has its schema opens, and its reads answer; its
    writes fail closed."""
    from tests.support.ledger_lock import held_elsewhere

    batch = _batch("a")
    first = Ledger(ledger_url)
    first.record_batch(batch)
    first.record_result(batch.id, _result("a"))
    first.close()
    with held_elsewhere(ledger_url):
        ledger = Ledger(ledger_url, retry_seconds=1.0)
        try:
            assert ledger.batch(batch.id).id == batch.id
            assert set(ledger.ends(batch.id)) == {"a"}
            with pytest.raises(LedgerUnavailable):
                ledger.record_event(batch.id, None, EventKind.cancelled)
        finally:
            ledger.close()


def test_a_batch_ends_at_the_time_of_its_last_end(ledger):
    """`ended_at` is when its last call ended, however late the batch is marked
    ended; a batch with a call the ledger holds no end for is not ended yet."""
    from sqlmodel import select

    from runtime.ledger.tables import EndRow

    batch = _batch("a", "b")
    ledger.record_batch(batch)
    ledger.record_result(batch.id, _result("a"))
    ledger.mark_ended(batch.id)
    assert ledger.batch(batch.id).ended_at is None, "b has no end yet"
    ledger.record_result(batch.id, _result("b"))
    query = select(EndRow.at).where(EndRow.batch_id == batch.id)
    last = max(ledger.transaction(lambda session: list(session.exec(query).all()), write=False))
    ledger.mark_ended(batch.id)
    assert ledger.batch(batch.id).ended_at == last


def test_an_end_that_may_be_its_batch_s_last_ends_the_batch_only_once_every_call_has_one(
    ledger,
):
    """`CallEnd.close`: the batch is marked ended in the end's own transaction
    if every call has its end then; else nothing more is written, and an end
    of a batch not recorded yet marks nothing."""
    batch = _batch("a", "b")
    ledger.record_batch(batch, plan={"p": 1})
    first = CallEnd(batch.id, _result("a"), close=True)
    assert ledger.record_end(first) and not first.closed
    assert ledger.batch(batch.id).ended_at is None and ledger.plan(batch.id) == {"p": 1}
    last = CallEnd(batch.id, _result("b"), close=True)
    assert ledger.record_end(last) and last.closed
    assert ledger.batch(batch.id).ended_at is not None and ledger.plan(batch.id) is None
    again = CallEnd(batch.id, _result("b"), close=True)
    assert not ledger.record_end(again) and not again.closed  # not its end: nothing written

    early = _batch("a")
    unrecorded = CallEnd(early.id, _result("a"), close=True)
    assert ledger.record_end(unrecorded) and not unrecorded.closed  # no batch row to mark
    assert ledger.record_batch(early) is Recorded.ended  # the record ends it


def test_progress_reads_plan_cancel_ends_and_claims_in_one_transaction(ledger):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    batch = _batch("a", "b", "c")
    ledger.record_batch(batch, plan={"stages": ["whole"]})
    assert ledger.claim(batch.id, "b", worker="w1").start == "run"
    ledger.record_result(batch.id, _result("a"))
    ledger.mark_cancelled(batch.id, by="ops")
    begun: list[object] = []

    def count(connection) -> None:
        begun.append(connection)

    event.listen(Engine, "begin", count)
    try:
        found = ledger.progress(batch.id, with_plan=True)
    finally:
        event.remove(Engine, "begin", count)
    assert len(begun) == 1
    assert found.plan == {"stages": ["whole"]} and found.recorded
    assert found.cancelled_by == "ops" and found.cancelled_at.tzinfo is not None
    assert found.ends == {"a": _result("a")}
    assert set(found.claimed) == {"b"}
    assert ledger.progress(batch.id).plan is None  # not asked for
    nothing = ledger.progress("no-such-batch", with_plan=True)
    assert (nothing.plan, nothing.recorded, nothing.ends, nothing.claimed) == (None, False, {}, {})


def test_a_late_record_takes_the_starts_and_ends_recorded_before_it(ledger):
    """`settle` binds one statement for every call: a column its events say
    nothing of keeps the record's value (a call only started has no end)."""
    batch = _batch("a", "b", "c")
    ledger.mark_started(batch.id, "a", worker="w1", attempt=1)
    error = ErrorInfo(kind="ValueError", message="bad")
    failed = _result("a", Status.error, error=error, duration_ms=12.5, worker="w1", attempts=1)
    ledger.record_end(CallEnd(batch.id, failed))
    ledger.mark_started(batch.id, "b", worker="w2", attempt=2)
    assert ledger.record_batch(batch) is Recorded.new
    a, b, c = ledger.calls(batch.id)
    assert (a.status, a.worker, a.attempts, a.duration_ms) == ("error", "w1", 1, 12.5)
    assert (a.summary, a.error_kind, a.error_message) == ("a done", "ValueError", "bad")
    assert a.started_at is not None and a.finished_at >= a.started_at
    assert (b.status, b.worker, b.attempts, b.finished_at) == ("running", "w2", 2, None)
    assert (c.status, c.worker, c.attempts, c.started_at) == ("pending", None, 0, None)


def test_a_record_landing_after_every_call_ended_ends_the_batch_with_it(ledger):
    """A batch of reads is sent before its record is written, so a quick
    worker may end every call first; its `mark_ended` then finds no batch row.
    The record's own transaction ends the batch (at its last end's time) and
    keeps no plan; a record landing while a call is open ends nothing."""
    batch = _batch("a", "b")
    ledger.record_end(CallEnd(batch.id, _result("a"), started_at=utc_now()))
    assert ledger.mark_ended(batch.id) is False  # no batch row yet
    ledger.record_end(CallEnd(batch.id, _result("b")))
    assert ledger.record_batch(batch, plan={"p": 1}) is Recorded.ended
    row = ledger.batch(batch.id)
    assert row.ended_at is not None and ledger.plan(batch.id) is None
    assert [c.status for c in ledger.calls(batch.id)] == ["ok", "ok"]

    still = _batch("a", "b")
    ledger.record_end(CallEnd(still.id, _result("a")))
    assert ledger.record_batch(still, plan={"p": 1}) is Recorded.new
    assert ledger.batch(still.id).ended_at is None and ledger.plan(still.id) == {"p": 1}


def test_the_ledger_never_raises_on_a_string_no_database_can_store(ledger):
    """Issue 40: a lone surrogate (which JSON can spell and UTF-8 cannot) in a
    workspace, a tool name, a call id, a submitter, an owner's name or an
    event: each is stored with U+FFFD in its place, nothing raises."""
    lone = "\ud800"
    batch = Batch(
        id="surrogates-batch",
        calls=[ToolCall(id=f"c{lone}", name=f"tool{lone}", arguments={f"k{lone}": f"v{lone}"})],
        workspace=f"/tmp/w{lone}",
    )
    assert ledger.record_batch(
        batch,
        columns={"submitter": f"s{lone}", "conversation": f"c{lone}"},
        owner={"key_id": f"id{lone}", "key_name": f"n{lone}"},
    )
    ledger.record_event(batch.id, f"c{lone}", EventKind.decision, reason=f"r{lone}")
    row = ledger.batch(batch.id)
    assert row.workspace == "/tmp/w\ufffd" and row.submitter == "s\ufffd"
    assert [call.tool for call in ledger.calls(batch.id)] == ["tool\ufffd"]
