"""The ledger's schema comes from Alembic revisions that match the SQLModel
tables: on an empty SQLite file always, and on an empty PostgreSQL database when
TOOLRUN_TEST_POSTGRES_URL names a server we may create databases on.

When a test here fails after a change to runtime/ledger/tables.py, write the
revision: `make migration m="what changed"`.
"""

from __future__ import annotations

import os
import threading

import pytest
from sqlalchemy import Column, MetaData, String, create_engine, inspect
from sqlmodel import SQLModel
from typer.testing import CliRunner

from runtime.errors import ConfigurationError, LedgerUnavailable
from runtime.ledger import schema
from runtime.ledger.store import EventKind, Ledger
from tests.support.postgres import fresh_database

POSTGRES_ENV = "TOOLRUN_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} not set: PostgreSQL schema tests skipped")
    with fresh_database(url) as database:
        yield database


def tables(url: str) -> set[str]:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_the_migrations_build_exactly_the_models(empty_database):
    assert schema.upgrade(empty_database) == schema.head()
    model_tables = {name for name in SQLModel.metadata.tables if name.startswith("toolrun_")}
    assert tables(empty_database) == model_tables | {schema.VERSION_TABLE}
    assert schema.differences(empty_database) == [], (
        'the models differ from the newest revision: run `make migration m="..."`'
    )


def test_upgrading_again_changes_nothing(empty_database):
    schema.upgrade(empty_database)
    assert schema.upgrade(empty_database) == schema.head()
    assert schema.current(empty_database) == schema.head()


def migrate_at_once(url: str, count: int = 4) -> list[Exception]:
    """What `count` migrators of `url`, started together, raised."""
    errors = []
    start = threading.Barrier(count)

    def migrate() -> None:
        start.wait()
        try:
            schema.upgrade(url)
        except Exception as error:  # noqa: BLE001 - reported by the caller
            errors.append(error)

    threads = [threading.Thread(target=migrate) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


def test_migrators_at_once_take_turns(empty_database):
    assert migrate_at_once(empty_database) == []
    assert schema.current(empty_database) == schema.head()


def test_migrators_of_a_new_sqlite_file_try_again_while_it_turns_to_wal(tmp_path):
    """Only one connection can turn a new file to WAL; SQLite refuses the others
    at once, without waiting out a busy timeout. A race lost in a few rounds of a
    hundred, so run thirty."""
    for round in range(30):
        url = f"sqlite:///{tmp_path / f'ledger-{round}.db'}"
        assert migrate_at_once(url) == [], f"round {round}"
        assert schema.current(url) == schema.head()


def test_a_ledger_on_an_empty_database_migrates_it(empty_database):
    ledger = Ledger(empty_database)
    try:
        ledger.record_event("b", "c", EventKind.decision)
    finally:
        ledger.close()
    assert schema.current(empty_database) == schema.head()
    assert schema.differences(empty_database) == []


def test_a_ledger_leaves_an_existing_schema_to_the_upgrade(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    schema.upgrade(url, "base")  # the version table only: a database someone manages
    Ledger(url).close()
    assert "toolrun_event" not in tables(url)
    assert schema.upgrade(url) == schema.head()


def test_a_database_made_by_create_all_is_adopted_when_it_matches(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    engine = create_engine(url)
    schema.metadata().create_all(engine)
    engine.dispose()
    assert schema.current(url) is None
    assert schema.upgrade(url) == schema.head()
    assert schema.differences(url) == []


def test_a_database_made_by_create_all_that_differs_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE toolrun_event (id INTEGER PRIMARY KEY)")
    engine.dispose()
    with pytest.raises(ConfigurationError, match="differ from the models"):
        schema.upgrade(url)
    assert schema.current(url) is None


def test_differences_name_what_the_models_have_and_the_database_lacks(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    schema.upgrade(url)
    models = MetaData()
    for table in schema.metadata().tables.values():
        table.to_metadata(models)
    models.tables["toolrun_event"].append_column(Column("flavour", String()))
    assert schema.differences(url, models) == ["add_column toolrun_event.flavour"]


def test_other_applications_tables_are_not_differences(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    schema.upgrade(url)
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE someone_else (id INTEGER PRIMARY KEY)")
    engine.dispose()
    assert schema.differences(url) == []


def test_an_unreachable_database_is_one_line_without_its_password():
    with pytest.raises(LedgerUnavailable) as raised:
        schema.upgrade("postgresql://u:hunter2@127.0.0.1:1/toolrun")
    assert "hunter2" not in str(raised.value) and "\n" not in str(raised.value)


def test_toolrun_db_upgrade_and_check(tmp_path, monkeypatch):
    from runtime.cli import app

    monkeypatch.setenv("TOOLRUN_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    checked = runner.invoke(app, ["db", "check"])
    assert checked.exit_code == 1 and "toolrun db upgrade" in checked.output
    upgraded = runner.invoke(app, ["db", "upgrade"])
    assert upgraded.exit_code == 0 and schema.head() in upgraded.output
    checked = runner.invoke(app, ["db", "check"])
    assert checked.exit_code == 0, checked.output


def test_a_new_revision_holds_what_the_models_added(tmp_path, monkeypatch):
    """`make migration` on a copy of the migrations, with a column the models gained."""
    import shutil

    copy = tmp_path / "migrations"
    shutil.copytree(schema.MIGRATIONS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    models = MetaData()
    for table in SQLModel.metadata.tables.values():
        table.to_metadata(models)
    models.tables["toolrun_call"].append_column(Column("flavour", String(), nullable=True))
    monkeypatch.setattr(schema, "MIGRATIONS", copy)
    monkeypatch.setattr(schema, "metadata", lambda: models)

    written = schema.revision("add call flavour")
    assert written is not None and written.parent == copy / "versions"
    text = written.read_text()
    assert 'batch_op.add_column(sa.Column("flavour", sa.String(), nullable=True))' in text
    assert "runtime" not in text and "sqlmodel" not in text  # plain SQLAlchemy types only
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert schema.upgrade(url) == schema.head() != "0001"
    assert schema.differences(url) == []
    assert schema.revision("nothing new") is None
