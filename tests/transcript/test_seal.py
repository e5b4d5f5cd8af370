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
from runtime.ledger.tables import EndRow, EventRow
from tests.conftest import runtime_on
from tests.support.cli import stack_env, toolrun
from tests.support.postgres import fresh_database
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.server, pytest.mark.timeout(300)]
EVENTS, ENDS = EventRow.__table__, EndRow.__table__


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path_factory):
    """The session's stack, or a stack of its own on a fresh PostgreSQL database."""
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

        with database.begin() as connection:  # an event, forged with its hash made again
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
        assert "call r1: its rows changed after the batch ended" in done.stdout
        assert "call e2" not in done.stdout

        with database.begin() as connection:  # a row of a call removed
            mine = (EVENTS.c.batch_id == batch_id) & (EVENTS.c.call_id == "e2")
            connection.execute(EVENTS.delete().where(mine, EVENTS.c.kind == "decision"))
        done = _verify(batch_id, env, tmp_path / "removed.json")
        assert "call e2: its rows changed after the batch ended" in done.stdout
    finally:
        database.dispose()
