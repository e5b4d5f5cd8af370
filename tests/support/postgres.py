"""A throwaway PostgreSQL database for tests, so runs never see each other's rows."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import uuid4

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from runtime.ledger.store import Ledger


@contextmanager
def fresh_database(url: str) -> Iterator[str]:
    """Create `toolrun_test_<random>` next to the database of `url` (which must
    exist and let us CREATE DATABASE), yield its URL, and drop it afterwards,
    closing any connection a test left open."""
    base = make_url(url)
    if base.drivername in ("postgres", "postgresql"):
        base = base.set(drivername="postgresql+psycopg")
    name = f"toolrun_test_{uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield base.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


@contextmanager
def own_ledger(kind: str, folder: Path) -> Iterator[Ledger]:
    """A ledger of the test's own: a SQLite file in `folder` (`kind` "sqlite"),
    or a fresh PostgreSQL database, the test skipped without
    TOOLRUN_TEST_POSTGRES_URL."""
    if kind == "sqlite":
        store = Ledger(f"sqlite:///{folder / 'ledger.db'}")
        yield store
        store.close()
        return
    url = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TOOLRUN_TEST_POSTGRES_URL not set: PostgreSQL ledger tests skipped")
    with fresh_database(url) as fresh:
        store = Ledger(fresh)
        yield store
        store.close()
