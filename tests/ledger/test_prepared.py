"""Statements run on the driver's cursor write and read what SQLAlchemy's
`Connection.execute` would, on SQLite and on PostgreSQL (when
TOOLRUN_TEST_POSTGRES_URL names a server), and fail as SQLAlchemy fails."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import (
    JSON,
    Column,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    create_engine,
    event,
    exc,
    insert,
    select,
    update,
)

from runtime.ledger.prepared import Prepared
from runtime.ledger.tables import UTCDateTime
from tests.support.postgres import fresh_database

META = MetaData()
THINGS = Table(
    "things",
    META,
    Column("id", Integer, primary_key=True),
    Column("name", String, nullable=False),
    Column("at", UTCDateTime),
    Column("body", JSON(none_as_null=True)),
)
INSERT = Prepared(insert(THINGS))
RENAME = Prepared(
    update(THINGS).where(THINGS.c.id == bindparam("key")).values(name=bindparam("new"))
)
NAME = Prepared(select(THINGS.c.name).where(THINGS.c.id == bindparam("key")), rows=True)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request, tmp_path):
    if request.param == "postgres":
        yield request.getfixturevalue("postgres_engine")
        return
    found = create_engine(f"sqlite:///{tmp_path / 'things.db'}")
    META.create_all(found)
    yield found
    found.dispose()


@pytest.fixture
def postgres_engine():
    url = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TOOLRUN_TEST_POSTGRES_URL not set")
    with fresh_database(url) as fresh:
        found = create_engine(fresh)
        META.create_all(found)
        yield found
        found.dispose()


def test_values_are_converted_as_sqlalchemy_converts_them(engine):
    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2)))
    body = {"a": [1, "two", None], "nested": {"x": 1.5}}
    with engine.begin() as connection:
        INSERT.execute(connection, {"id": 1, "name": "one", "at": at, "body": body})
        INSERT.execute_many(
            connection,
            [
                {"id": 2, "name": "two", "at": None, "body": None},
                {"id": 3, "name": "three", "at": at, "body": [1]},
            ],
        )
        connection.execute(insert(THINGS), {"id": 4, "name": "four", "at": at, "body": body})
    with engine.connect() as connection:
        rows = connection.execute(select(THINGS).order_by(THINGS.c.id)).all()
    assert [tuple(row) for row in rows] == [
        (1, "one", at.astimezone(UTC), body),
        (2, "two", None, None),
        (3, "three", at.astimezone(UTC), [1]),
        (4, "four", at.astimezone(UTC), body),  # SQLAlchemy's own: the same
    ]


def test_rows_changed_and_rows_read(engine):
    with engine.begin() as connection:
        INSERT.execute(connection, {"id": 1, "name": "one", "at": None, "body": None})
        assert RENAME.execute(connection, {"key": 1, "new": "uno"}) == 1
        assert RENAME.execute(connection, {"key": 9, "new": "nine"}) == 0
        assert NAME.first(connection, {"key": 1}) == ("uno",)
        assert NAME.first(connection, {"key": 9}) is None


def test_a_driver_error_is_sqlalchemy_s_and_the_transaction_rolls_back(engine):
    with engine.begin() as connection:
        INSERT.execute(connection, {"id": 1, "name": "one", "at": None, "body": None})
    with pytest.raises(exc.IntegrityError), engine.begin() as connection:
        INSERT.execute(connection, {"id": 2, "name": "two", "at": None, "body": None})
        INSERT.execute(connection, {"id": 1, "name": "again", "at": None, "body": None})
    with engine.connect() as connection:
        assert NAME.first(connection, {"key": 2}) is None


def test_statements_listened_for_go_through_sqlalchemy(engine):
    seen: list[str] = []

    def listen(conn, cursor, statement, *_: object) -> None:
        seen.append(statement.split(None, 1)[0])

    event.listen(engine, "before_cursor_execute", listen)
    try:
        with engine.begin() as connection:
            INSERT.execute(connection, {"id": 1, "name": "one", "at": None, "body": None})
            assert RENAME.execute(connection, {"key": 1, "new": "uno"}) == 1
            assert NAME.first(connection, {"key": 1}) == ("uno",)
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    assert seen == ["INSERT", "UPDATE", "SELECT"]


def test_rows_whose_columns_need_converting_come_back_as_sqlalchemy_s(engine):
    at = datetime(2026, 12, 5, 3, 40, 1, 123456, tzinfo=UTC)
    body = {"b": [1, 2.5, None], "a": "\u00e9"}
    whole = select(THINGS).where(THINGS.c.id == bindparam("key"))
    everything = Prepared(whole, rows=True)
    with engine.begin() as connection:
        INSERT.execute(connection, {"id": 1, "name": "one", "at": at, "body": body})
        INSERT.execute(connection, {"id": 2, "name": "two", "at": None, "body": None})
    with engine.connect() as connection:
        for key in (1, 2):
            theirs = tuple(connection.execute(whole, {"key": key}).first())
            assert everything.first(connection, {"key": key}) == theirs
            assert everything.all(connection, {"key": key}) == [theirs]
        assert everything.first(connection, {"key": 1})[2:] == (at, body)


@pytest.mark.postgres
def test_a_connection_the_server_dropped_is_invalidated_and_the_next_one_works(postgres_engine):
    engine = postgres_engine
    with pytest.raises(exc.OperationalError) as raised, engine.begin() as connection:
        pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with engine.connect() as other:
            other.exec_driver_sql(f"SELECT pg_terminate_backend({pid})")
        INSERT.execute(connection, {"id": 1, "name": "one", "at": None, "body": None})
    assert raised.value.connection_invalidated
    with engine.begin() as connection:
        INSERT.execute(connection, {"id": 1, "name": "one", "at": None, "body": None})
        assert NAME.first(connection, {"key": 1}) == ("one",)
