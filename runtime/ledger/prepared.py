"""Statements of the hot paths (a call's end, a side effect's claim), compiled
once per database dialect and run on the driver's cursor, inside the caller's
SQLAlchemy transaction.

`Connection.execute` of a statement built once still costs about 25 us of CPU
before the driver sees it (its cache lookup, an execution context, events, a
result object): more than SQLite takes to run it, and a read's end is six
statements. Here the SQL, the order of its parameters and their conversions
(times, JSON) are SQLAlchemy's own, taken once from its compiled form, which
it makes per set of columns given as `Connection.execute` does; each run
converts the values and hands them to the driver (docs/architecture.md,
"Round trips and memory").

A driver's error is raised as SQLAlchemy raises it (`DBAPIError.instance`:
`OperationalError`, `IntegrityError`, ...), and a connection the database
dropped is invalidated, so the ledger's retries and faults see what they saw
before. While anyone listens for statements (`before_cursor_execute`: the
profiler's counts, an instrumentation), or for a statement that needs more
than its values bound (a column default computed in Python, an expanding
parameter), statements go through `Connection.execute`.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str, every one is unpaired: UTF-8 has none


@dataclass(frozen=True)
class _Form:
    """A statement compiled for one dialect and one set of given columns."""

    sql: str
    compiled: SQLCompiler
    order: tuple[str, ...] | None  # a positional driver's parameters, in order
    convert: dict[str, Callable[[Any], Any]]  # the bind types' conversions, by name
    names: dict[str, str]  # a named driver's escaped parameter names
    results: tuple[Callable[[Any], Any] | None, ...]  # each returned column's conversion


class Prepared:
    """A statement built once, run with values bound per call."""

    def __init__(self, statement: ClauseElement, *, rows: bool = False) -> None:
        """`rows`: it returns rows (a SELECT, a RETURNING), each value converted
        from what the driver gives as SQLAlchemy converts it (its column type's
        own result processor: times, JSON), as tuples."""
        self.statement, self.rows = statement, rows
        self._forms: weakref.WeakKeyDictionary[Dialect, dict[frozenset[str], _Form | None]] = (
            weakref.WeakKeyDictionary()
        )

    def execute(self, connection: Connection, values: dict[str, Any]) -> int:
        """Run it with `values`; the number of rows it changed."""
        form = self._form(connection, values)
        if form is None:
            return connection.execute(self.statement, values).rowcount
        cursor = _run(connection, form, lambda c: c.execute(form.sql, _bound(form, values)))
        try:
            return cursor.rowcount
        finally:
            cursor.close()

    def first(self, connection: Connection, values: dict[str, Any]) -> tuple[Any, ...] | None:
        """Run it with `values`; its first row, or None."""
        form = self._form(connection, values)
        if form is None:
            found = connection.execute(self.statement, values).first()
            return None if found is None else tuple(found)
        cursor = _run(connection, form, lambda c: c.execute(form.sql, _bound(form, values)))
        try:
            found = cursor.fetchall()  # the whole statement: SQLite finishes it
        finally:
            cursor.close()
        return _converted(form, found[0]) if found else None

    def all(self, connection: Connection, values: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run it with `values`; every row it returns."""
        form = self._form(connection, values)
        if form is None:
            return [tuple(row) for row in connection.execute(self.statement, values)]
        cursor = _run(connection, form, lambda c: c.execute(form.sql, _bound(form, values)))
        try:
            return [_converted(form, row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    def execute_many(self, connection: Connection, rows: Sequence[dict[str, Any]]) -> None:
        """Run it once per row of `rows` (the driver's `executemany`); every
        row gives the same columns."""
        if not rows:
            return
        form = self._form(connection, rows[0])
        if form is None:
            connection.execute(self.statement, list(rows))
            return
        bound = [_bound(form, row) for row in rows]
        _run(connection, form, lambda c: c.executemany(form.sql, bound)).close()

    def _form(self, connection: Connection, values: dict[str, Any]) -> _Form | None:
        if connection.dispatch.before_cursor_execute:
            return None
        dialect = connection.dialect
        forms = self._forms.get(dialect)
        if forms is None:
            forms = self._forms[dialect] = {}
        keys = frozenset(values)
        try:
            return forms[keys]
        except KeyError:
            form = forms[keys] = self._compile(dialect, keys)
            return form

    def _compile(self, dialect: Dialect, keys: frozenset[str]) -> _Form | None:
        compiled = self.statement.compile(dialect=dialect, column_keys=sorted(keys))
        if (
            compiled.insert_prefetch
            or compiled.update_prefetch
            or compiled.literal_execute_params
            or compiled.post_compile_params
        ):
            return None  # more than values to bind: SQLAlchemy runs it
        results: tuple[Callable[[Any], Any] | None, ...] = ()
        if self.rows:  # each column's type's own conversion, as SQLAlchemy's result applies it
            columns = compiled._result_columns  # noqa: SLF001
            results = tuple(
                column[3]._cached_result_processor(dialect, None)  # noqa: SLF001
                for column in columns
            )
        order = tuple(compiled.positiontup or ()) if compiled.positional else None
        convert = dict(compiled._bind_processors)  # noqa: SLF001 - SQLAlchemy's own conversions
        names = compiled.escaped_bind_names
        return _Form(compiled.string, compiled, order, convert, names, results)


def _converted(form: _Form, row: Sequence[Any]) -> tuple[Any, ...]:
    """A row as the driver gave it, each value converted as SQLAlchemy would."""
    if not any(form.results):
        return tuple(row)
    return tuple(
        value if convert is None else convert(value)
        for value, convert in zip(row, form.results, strict=True)
    )


def storable(value: Any) -> Any:
    """`value`, with a string no database can store made storable: a lone
    surrogate (`"\\ud800"`, which JSON can spell and UTF-8 cannot) becomes
    U+FFFD, so that no string a client sends makes the ledger raise
    (docs/architecture.md, "The ledger"). Other values are returned as they are."""
    if type(value) is str and not value.isascii():
        return _SURROGATE.sub("\ufffd", value)
    return value


def _bound(form: _Form, values: dict[str, Any]) -> Sequence[Any] | dict[str, Any]:
    """The driver's parameters: every bind's value, converted as SQLAlchemy
    would, and `storable`."""
    found = form.compiled.construct_params(values, escape_names=False)
    for name, convert in form.convert.items():
        if name in found:
            found[name] = convert(found[name])
    for name, value in found.items():
        if type(value) is str and not value.isascii():
            found[name] = storable(value)
    if form.order is not None:
        return [found[name] for name in form.order]
    if form.names:
        return {form.names.get(name, name): value for name, value in found.items()}
    return found


def _run(connection: Connection, form: _Form, work: Callable[[Any], object]) -> Any:
    """`work(cursor)` on a cursor of the transaction's own driver connection."""
    dialect = connection.dialect
    raw = connection.connection.dbapi_connection
    cursor = raw.cursor()
    try:
        work(cursor)
    except dialect.loaded_dbapi.Error as error:
        cursor.close()
        dropped = dialect.is_disconnect(error, raw, cursor)
        if dropped:
            connection.invalidate(error)
        raise exc.DBAPIError.instance(
            form.sql,
            None,
            error,
            dialect.loaded_dbapi.Error,
            connection_invalidated=dropped,
            dialect=dialect,
        ) from error
    return cursor
