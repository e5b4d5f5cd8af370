"""`INSERT ... ON CONFLICT` in the ledger's SQL dialect. PostgreSQL's dialect module
(with its catalog) is imported on first use: it cost about 80 ms at import, which
every client and worker on SQLite paid (docs/architecture.md, "Starting fast")."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects.sqlite import insert as sqlite_insert


def insert_for(dialect: str) -> Any:
    """The `insert` construct with `on_conflict_do_nothing` of `dialect`'s name."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert

        return insert
    return sqlite_insert
