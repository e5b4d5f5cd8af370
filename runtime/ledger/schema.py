"""The ledger's schema, owned by Alembic (`runtime/ledger/migrations/`): bring a database
to the newest revision, adopt one that an older toolrun made with `create_all`,
and tell how a database differs from the SQLModel tables.

Who migrates: `toolrun db upgrade`, which the compose `migrate` service runs
before any worker starts and `toolrun up` runs before it starts the embedded
stack. A `Ledger` opened on an *empty* database migrates it itself (`bootstrap`),
so a library user or a test needs no step; it never upgrades a database that
already has a schema, because that is a deployment step, not a race for every
worker that starts. It finds out with a read first (`present`), so a process
starts while another holds the write lock.

Migrations run in one transaction under a lock (PostgreSQL: an advisory lock;
SQLite: BEGIN IMMEDIATE), so processes that migrate at once take turns and the
later ones find nothing left to do.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import tenacity
from sqlalchemy import MetaData, exc, inspect, text
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel
from sqlmodel.sql.sqltypes import AutoString

from runtime.errors import ConfigurationError, LedgerUnavailable
from runtime.ledger.engine import engine, writer
from runtime.ledger.tables import UTCDateTime  # importing the tables registers them
from runtime.redaction import redact_text

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "toolrun_alembic_version"  # not `alembic_version`: the database may be shared
PREFIX = "toolrun_"
_LOCK_KEY = int.from_bytes(b"toolrun", "big")  # the advisory lock every migrator takes
_LOCKED_PATIENCE = 30.0  # seconds a migrator tries again while a new SQLite file is locked


def metadata() -> MetaData:
    """The tables the models declare (importing `tables` registers them)."""
    return SQLModel.metadata


def upgrade(url: str, revision: str = "head") -> str | None:
    """Migrate the database at `url` to `revision`; its revision afterwards.

    A database holding toolrun tables but no revision (an older toolrun made it
    with `create_all`) is stamped at head if it matches the models, and is an
    error otherwise: guessing which revision it is at could lose rows.
    """
    with _transaction(url) as connection:
        names = set(inspect(connection).get_table_names())
        if VERSION_TABLE not in names and names & set(_model_tables()):
            found = differences(connection)
            if found:
                raise ConfigurationError(
                    f"the ledger at {_safe(url)} has toolrun tables that no migration made, "
                    f"and they differ from the models ({'; '.join(found)}); move it aside "
                    "or migrate it by hand"
                )
            _alembic("stamp", connection, "head")
        else:
            _alembic("upgrade", connection, revision)
        return _current(connection)


def bootstrap(connection: Connection) -> bool:
    """Migrate an empty database to head, within the caller's transaction;
    leave any other alone. Whether it migrated."""
    _lock(connection)
    if present(connection):
        return False
    _alembic("upgrade", connection, "head")
    return True


def present(connection: Connection) -> bool:
    """Whether the database has a schema (a revision, or tables an older
    toolrun made): a read, which another process's write lock does not hold up."""
    names = set(inspect(connection).get_table_names())
    return VERSION_TABLE in names or bool(names & set(_model_tables()))


def current(url: str) -> str | None:
    """The revision the database at `url` is at; None if it has none."""
    with _transaction(url, lock=False) as connection:
        return _current(connection)


def head() -> str | None:
    """The newest revision in `runtime/ledger/migrations/versions`."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config()).get_current_head()


def differences(target: str | Connection, tables: MetaData | None = None) -> list[str]:
    """How the database differs from the models, one line per difference
    (what autogenerate would write); empty when they match."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    if isinstance(target, str):
        with _transaction(target, lock=False) as connection:
            return differences(connection, tables)
    tables = tables if tables is not None else metadata()
    options = context_options(target, tables=tables)
    context = MigrationContext.configure(target, opts=options)
    return [_describe(diff) for diff in compare_metadata(context, tables)]


def revision(message: str) -> Path | None:
    """Write the next revision: what the models hold and the newest revision
    lacks, found against a scratch SQLite database. None if nothing differs."""
    from alembic import command
    from alembic.script import ScriptDirectory

    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{scratch}/draft.db"
        upgrade(url)
        with _transaction(url) as connection:
            config = _config(connection)
            config.attributes["process_revision_directives"] = _skip_empty
            count = sum(1 for _ in ScriptDirectory.from_config(config).walk_revisions())
            script = command.revision(
                config, message=message, autogenerate=True, rev_id=f"{count + 1:04d}"
            )
    if isinstance(script, list):  # Alembic's answer when `_skip_empty` dropped it
        script = script[0] if script else None
    if script is None:
        return None
    _tidy(Path(script.path))
    return Path(script.path)


def context_options(connection: Connection, *, tables: MetaData | None = None) -> dict[str, Any]:
    """How Alembic compares and renders, shared by env.py and `differences`."""
    return {
        "target_metadata": tables if tables is not None else metadata(),
        "version_table": VERSION_TABLE,
        # Revisions run on SQLite too, which cannot ALTER much: batch operations
        # copy the table there and are plain ALTERs elsewhere.
        "render_as_batch": True,
        "compare_type": True,
        "include_object": _include_object,
        "render_item": _render_item,
    }


def _model_tables() -> list[str]:
    return [name for name in metadata().tables if name.startswith(PREFIX)]


def _config(connection: Connection | None = None):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("file_template", "%%(rev)s_%%(slug)s")
    config.set_main_option("truncate_slug_length", "60")
    config.attributes["connection"] = connection
    return config


def _alembic(verb: str, connection: Connection, revision: str) -> None:
    from alembic import command

    getattr(command, verb)(_config(connection), revision)


def _current(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


class _transaction:
    """A connection to `url` inside one transaction, the migrators' lock held."""

    def __init__(self, url: str, *, lock: bool = True) -> None:
        self._engine = writer(engine(url))
        self._lock = lock

    def __enter__(self) -> Connection:
        try:
            for attempt in tenacity.Retrying(
                retry=tenacity.retry_if_exception(_locked),
                stop=tenacity.stop_after_delay(_LOCKED_PATIENCE),
                wait=tenacity.wait_random_exponential(multiplier=0.02, max=0.5),
                reraise=True,
            ):
                with attempt:
                    self._begin()
        except exc.SQLAlchemyError as error:
            self._engine.engine.dispose()
            raise self._unavailable(error) from error
        return self._connection

    def _begin(self) -> None:
        self._connection = self._engine.connect()
        try:
            self._transaction = self._connection.begin()
            if self._lock:
                _lock(self._connection)
        except BaseException:
            self._connection.close()
            raise

    def __exit__(self, kind, error, trace) -> None:
        try:
            if error is None:
                self._transaction.commit()
            else:
                self._transaction.rollback()
        except exc.SQLAlchemyError as failure:
            if error is None:
                raise self._unavailable(failure) from failure
        finally:
            self._connection.close()
            self._engine.engine.dispose()
        if isinstance(error, exc.SQLAlchemyError):
            raise self._unavailable(error) from error

    def _unavailable(self, error: exc.SQLAlchemyError) -> LedgerUnavailable:
        cause = getattr(error, "orig", None) or error
        text = redact_text(" ".join(str(cause).split()))[:500]
        url = self._engine.url.render_as_string(hide_password=True)
        return LedgerUnavailable(f"ledger {url}: {type(cause).__name__}: {text}")


def _locked(error: BaseException) -> bool:
    """SQLite's "database is locked" that no busy timeout waits out: when several
    connections turn a new file to WAL at once, the engine's connect hook
    (`PRAGMA journal_mode = WAL`) may fail at once for all but the first."""
    return isinstance(error, exc.OperationalError) and "database is locked" in str(error)


def _lock(connection: Connection) -> None:
    """Take the migrators' lock until the transaction ends. SQLite needs none
    here: the transaction began IMMEDIATE, which already excludes other writers."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})


def _include_object(item: Any, name: str | None, kind: str, reflected: bool, compare_to) -> bool:
    """toolrun's tables are those named `toolrun_*`: the database may hold other
    applications' tables, and the process other SQLModel tables."""
    return kind != "table" or (name or "").startswith(PREFIX)


def _render_item(kind: str, item: Any, context: Any) -> str | bool:
    """Write plain SQLAlchemy types into revisions, never toolrun's or SQLModel's
    classes: a revision must not change when a model module is refactored."""
    if kind == "type" and isinstance(item, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    if kind == "type" and isinstance(item, AutoString):
        return f"sa.String({item.length or ''})"
    return False


def _skip_empty(context: Any, revision: Any, directives: list) -> None:
    if directives and directives[0].upgrade_ops.is_empty():
        directives[:] = []


def _tidy(path: Path) -> None:
    """Format a new revision as the rest of the code is, where ruff is installed."""
    if importlib.util.find_spec("ruff") is None:
        return
    for step in (["check", "--fix", "--quiet"], ["format", "--quiet"]):
        subprocess.run([sys.executable, "-m", "ruff", *step, str(path)], check=False)


def _describe(diff: Any) -> str:
    """One autogenerate difference as a short line."""
    if isinstance(diff, list):  # column modifications come grouped
        return "; ".join(_describe(item) for item in diff)
    verb, *rest = diff
    if verb in ("add_table", "remove_table"):
        return f"{verb} {rest[0].name}"
    if verb in ("add_column", "remove_column"):
        return f"{verb} {rest[1]}.{rest[2].name}"
    if verb in ("add_index", "remove_index"):
        return f"{verb} {rest[0].name} on {rest[0].table.name}"
    if verb.startswith("modify_"):
        return f"{verb} {rest[1]}.{rest[2]}: {rest[-2]} -> {rest[-1]}"
    return " ".join([verb, *map(str, rest)])


def _safe(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
