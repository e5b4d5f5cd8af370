"""A batch's rows fixed when it ends (runtime/ledger/chain.py), on real
workers and the installed `toolrun`: an export of rows edited in the ledger
after they were written, even with their hashes made again, fails `toolrun
transcript verify`, which names the call whose rows changed (issue 40). On
the session's stack (SQLite) and on a stack of PostgreSQL when
TOOLRUN_TEST_POSTGRES_URL is set."""

from __future__ import annotations

import json
import os

import pytest
from sqlalchemy import create_engine, select, update

from runtime.ledger.chain import event_hash
from runtime.ledger.tables import BatchRow, CallRow, EndRow, EventRow
from tests.conftest import runtime_on
from tests.support.cli import stack_env, toolrun
from tests.support.postgres import fresh_database
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.server, pytest.mark.timeout(300)]
EVENTS, ENDS = EventRow.__table__, EndRow.__table__
BATCHES, CALLS = BatchRow.__table__, CallRow.__table__


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def backend(request, tmp_path_factory):
    """The session's stack, or one of the module's own on a fresh PostgreSQL
    database: each test edits the rows of its own batch only."""
    if request.param == "sqlite":
        yield request.getfixturevalue("stack")
        return
    from runtime.settings import Settings
    from runtime.stack.embedded import start_stack, stop_stack

    url = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TOOLRUN_TEST_POSTGRES_URL not set: PostgreSQL tests skipped")
    tools = "tests.support.tools"
    with fresh_database(url) as database_url:
        home = tmp_path_factory.mktemp("toolrun-seal-pg")
        settings = Settings(
            home=home, redis_url=None, database_url=database_url, tool_modules=tools
        )
        try:
            yield start_stack(settings, flower=False, extra_env={"TOOLRUN_TOOL_MODULES": tools})
        finally:
            stop_stack(home)


def _verify(batch_id, env, path):
    done = toolrun("transcript", batch_id, "--output", str(path), env=env)
    assert done.returncode == 0, done.stderr
    return toolrun("transcript", "verify", str(path), env=env)


def test_rows_edited_after_the_end_fail_verify_naming_their_call(
    backend, user_settings, workspace, tmp_path
):
    (workspace / "a.txt").write_text("alpha\n")
    calls = [
        {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "e1", "name": "echo", "arguments": {"text": "hello"}},
        {"id": "e2", "name": "echo", "arguments": {"text": "there"}},
    ]
    rt = runtime_on(backend, user_settings)
    try:
        handle = rt.submit(calls, workspace=workspace, timeout=60)  # reads: run in parallel
        assert all(r.ok for r in handle.results(timeout=60))
        key = backend.signing_key.encode()
        wait_for(lambda: rt.ledger.rows_check(handle.batch_id, key)["sealed"], timeout=60)
    finally:
        rt.close()
    env, batch_id = stack_env(backend, user_settings), handle.batch_id
    done = _verify(batch_id, env, tmp_path / "before.json")
    assert done.returncode == 0, done.stdout
    assert json.loads((tmp_path / "before.json").read_text())["integrity"]["rows"] == {
        "sealed": True,
        "problems": [],
    }

    database = create_engine(backend.database_url)
    try:
        with database.begin() as connection:  # the model's answer, forged
            mine = (ENDS.c.batch_id == batch_id) & (ENDS.c.call_id == "e1")
            result = connection.execute(select(ENDS.c.result).where(mine)).scalar_one()
            forged = result | {"content": "forged", "model_message": "forged"}
            connection.execute(update(ENDS).where(mine).values(result=forged))
        done = _verify(batch_id, env, tmp_path / "end.json")
        assert done.returncode == 1, done.stdout
        assert "call e1: its end row (ok) changed after it was written" in done.stdout
        assert "call r1" not in done.stdout and "call e2" not in done.stdout

        with database.begin() as connection:  # an event, its hash made again without the key
            mine = (EVENTS.c.batch_id == batch_id) & (EVENTS.c.call_id == "r1")
            row = connection.execute(select(EVENTS).where(mine, EVENTS.c.kind == "finished")).one()
            fields = row._asdict() | {"worker": "elsewhere"}
            connection.execute(
                update(EVENTS)
                .where(EVENTS.c.id == row.id)
                .values(worker="elsewhere", chain=event_hash(fields))
            )
        done = _verify(batch_id, env, tmp_path / "event.json")
        assert done.returncode == 1, done.stdout
        assert "call r1: its event row (finished) changed after it was written" in done.stdout
        assert "call e2" not in done.stdout

        with database.begin() as connection:  # a row of a call removed
            mine = (EVENTS.c.batch_id == batch_id) & (EVENTS.c.call_id == "e2")
            connection.execute(EVENTS.delete().where(mine, EVENTS.c.kind == "decision"))
        done = _verify(batch_id, env, tmp_path / "removed.json")
        assert "call e2: its rows changed after the batch ended" in done.stdout

        with database.begin() as connection:  # who submitted it, forged
            connection.execute(
                update(BATCHES).where(BATCHES.c.id == batch_id).values(submitter="someone")
            )
        done = _verify(batch_id, env, tmp_path / "submitter.json")
        assert f"batch {batch_id}: its batch row changed after the batch ended" in done.stdout
    finally:
        database.dispose()


def _conversation(stack, user_settings, workspace, name):
    """Three turns of `name`, each ended and sealed before the next is submitted."""
    rt = runtime_on(stack, user_settings)
    ids, key = [], stack.signing_key.encode()
    try:
        for number in range(3):
            call = {"id": f"t{number}", "name": "echo", "arguments": {"text": f"turn {number}"}}
            handle = rt.submit([call], workspace=workspace, conversation=name, timeout=60)
            assert handle.results(timeout=60)[0].ok
            wait_for(lambda h=handle: rt.ledger.rows_check(h.batch_id, key)["sealed"], timeout=60)
            ids.append(handle.batch_id)
    finally:
        rt.close()
    return ids


def _drop(connection, batch_id):
    connection.execute(BATCHES.delete().where(BATCHES.c.id == batch_id))
    for table in (CALLS, EVENTS, ENDS):
        connection.execute(table.delete().where(table.c.batch_id == batch_id))


def test_a_turn_removed_at_either_end_or_re_chained_fails_verify(
    backend, user_settings, workspace, tmp_path
):
    """Issue 40: dropping a conversation's first or last turn, or editing an
    earlier turn and making the next one's `previous_digest` again (no key
    needed), passed `verify --conversation`; each is named now."""
    from runtime import transcript
    from runtime.ledger.store import Ledger

    env, tag = stack_env(backend, user_settings), os.urandom(4).hex()
    names = {what: f"c-{what}-{tag}" for what in ("first", "last", "edit")}
    turns = {what: _conversation(backend, user_settings, workspace, n) for what, n in names.items()}
    for name in names.values():
        done = toolrun("transcript", "verify", "--conversation", name, env=env)
        assert done.returncode == 0, done.stdout
        assert "3 turn(s), every link holds" in done.stdout
    files = [tmp_path / f"{b}.json" for b in turns["last"]]
    for batch_id, path in zip(turns["last"], files, strict=True):
        assert toolrun("transcript", batch_id, "--output", str(path), env=env).returncode == 0
    assert toolrun("transcript", "verify", *map(str, files), env=env).returncode == 0
    done = toolrun("transcript", "verify", *map(str, files[1:]), env=env)  # the first left out
    assert done.returncode == 1, done.stdout
    assert f"the turn before it ({turns['last'][0]}) is missing" in done.stdout

    database = create_engine(backend.database_url)
    try:
        with database.begin() as connection:
            first, second, _ = turns["first"]
            _drop(connection, first)
            connection.execute(  # the second turn made to look like the first
                update(BATCHES)
                .where(BATCHES.c.id == second)
                .values(previous_batch=None, previous_digest=None)
            )
            _drop(connection, turns["last"][2])
            first, second, _ = turns["edit"]
            connection.execute(
                update(CALLS).where(CALLS.c.batch_id == first).values(arguments={"text": "forged"})
            )
        ledger = Ledger(backend.database_url)
        forged = transcript.digest(transcript.build(ledger, turns["edit"][0]))
        ledger.close()
        with database.begin() as connection:
            connection.execute(
                update(BATCHES)
                .where(BATCHES.c.id == turns["edit"][1])
                .values(previous_digest=forged)
            )
    finally:
        database.dispose()

    done = toolrun("transcript", "verify", "--conversation", names["first"], env=env)
    assert done.returncode == 1, done.stdout
    assert f"batch {turns['first'][1]}: is turn 2; the turns before it are missing" in done.stdout
    assert f"batch {turns['first'][1]}: its link was re-chained after it ended" in done.stdout

    done = toolrun("transcript", "verify", "--conversation", names["last"], env=env)
    assert done.returncode == 1, done.stdout
    assert f"its last turn ({turns['last'][2]}, turn 3) is missing from the ledger" in done.stdout

    done = toolrun("transcript", "verify", "--conversation", names["edit"], env=env)
    assert done.returncode == 1, done.stdout
    assert f"batch {turns['edit'][0]}: call t0: its rows changed after the batch ended" in (
        done.stdout
    )
    assert f"batch {turns['edit'][1]}: its link was re-chained after it ended" in done.stdout
