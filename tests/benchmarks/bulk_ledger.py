"""A ledger after months of use, fast: `calls` ended read calls in batches of
`per_batch`, with the rows a real call leaves (its call row, its end, its
usage, a decision and a finished event), ended over the `days` before now.
Raw `executemany` on SQLite and `COPY` on PostgreSQL, never the ORM: a million
calls load in about a minute (`python -m tests.benchmarks.bulk_ledger URL`)."""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.engine import make_url

from runtime.ledger.tables import BatchRow, CallRow, EndRow, EventRow, UsageRow

CHUNK = 5_000  # batches per transaction
PREFIX = "bulk-"  # every bulk batch's id starts with it
RESULT = json.dumps(
    {
        "call_id": "c0",
        "tool": "bench_noop",
        "status": "ok",
        "model_message": "ok",
        "summary": "ok",
        "duration_ms": 1.2,
        "attempts": 1,
        "worker": "bench@host",
    }
)


def _rows(calls: int, per_batch: int, days: float) -> Iterator[dict[str, list[tuple]]]:
    """The rows, a chunk of batches at a time, as tuples in `COLUMNS` order."""
    now = datetime.now(UTC)
    count = -(-calls // per_batch)
    span = timedelta(days=days).total_seconds()
    chunk: dict[str, list[tuple]] = {name: [] for name in COLUMNS}
    for index in range(count):
        batch = f"{PREFIX}{uuid.uuid4().hex}"
        ended = now - timedelta(seconds=span * (1 - index / count) + 3600)
        began = ended - timedelta(milliseconds=20)
        size = min(per_batch, calls - index * per_batch)
        chunk["toolrun_batch"].append(
            (
                batch,
                "auto",
                "/srv/work",
                "stop",
                size,
                "v1",
                began,
                f"key:k{index % 50}",
                began + timedelta(seconds=300),
                ended,
                '[{"parallel": true}]',
            )
        )
        for position in range(size):
            call = f"c{position}"
            chunk["toolrun_call"].append(
                (
                    batch,
                    call,
                    position,
                    "bench_noop",
                    "read",
                    "ok",
                    "{}",
                    "ok",
                    1.2,
                    "bench@host",
                    1,
                    began,
                    ended,
                )
            )
            chunk["toolrun_end"].append((batch, call, "ok", RESULT, ended))
            chunk["toolrun_usage"].append((batch, call, "bench_noop", "ok", ended, 1.2, 0.8, 3.0))
            chunk["toolrun_event"].append((batch, call, "decision", began, "auto", "read", "allow"))
            chunk["toolrun_event"].append((batch, call, "finished", ended, None, None, None))
        if (index + 1) % CHUNK == 0 or index + 1 == count:
            yield chunk
            chunk = {name: [] for name in COLUMNS}


COLUMNS: dict[str, tuple[str, ...]] = {
    BatchRow.__tablename__: (
        "id",
        "mode",
        "workspace",
        "on_error",
        "call_count",
        "policy_version",
        "created_at",
        "submitter",
        "deadline_at",
        "ended_at",
        "stages",
    ),
    CallRow.__tablename__: (
        "batch_id",
        "call_id",
        "position",
        "tool",
        "risk",
        "status",
        "arguments",
        "summary",
        "duration_ms",
        "worker",
        "attempts",
        "started_at",
        "finished_at",
    ),
    EndRow.__tablename__: ("batch_id", "call_id", "status", "result", "at"),
    UsageRow.__tablename__: (
        "batch_id",
        "call_id",
        "tool",
        "status",
        "at",
        "wall_ms",
        "cpu_ms",
        "queue_ms",
    ),
    EventRow.__tablename__: ("batch_id", "call_id", "kind", "at", "mode", "risk", "effect"),
}


def load(url: str, calls: int = 1_000_000, per_batch: int = 10, days: float = 60) -> dict[str, Any]:
    """Load into the (migrated) ledger at `url`; what was loaded and how long it took."""
    began = time.monotonic()
    parsed = make_url(url)
    rows = 0
    if parsed.get_backend_name() == "sqlite":
        rows = _sqlite(parsed.database, _rows(calls, per_batch, days))
    else:
        rows = _postgres(parsed, _rows(calls, per_batch, days))
    return {
        "calls": calls,
        "batches": -(-calls // per_batch),
        "rows": rows,
        "seconds": round(time.monotonic() - began, 1),
    }


def _sqlite(path: str, chunks: Iterator[dict[str, list[tuple]]]) -> int:
    def stamp(value: Any) -> Any:  # SQLAlchemy's SQLite DATETIME text, UTC
        return value.strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(value, datetime) else value

    connection = sqlite3.connect(path, timeout=60, isolation_level=None)
    total = 0
    try:
        for chunk in chunks:
            connection.execute("BEGIN IMMEDIATE")
            for table, rows in chunk.items():
                names = COLUMNS[table]
                marks = ", ".join("?" * len(names))
                statement = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})"
                connection.executemany(statement, ([stamp(v) for v in row] for row in rows))
                total += len(rows)
            connection.execute("COMMIT")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("ANALYZE")
    finally:
        connection.close()
    return total


def _postgres(parsed, chunks: Iterator[dict[str, list[tuple]]]) -> int:
    import psycopg

    plain = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    total = 0
    with psycopg.connect(plain) as connection:
        for chunk in chunks:
            with connection.cursor() as cursor:
                for table, rows in chunk.items():
                    names = ", ".join(COLUMNS[table])
                    with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                        for row in rows:
                            copy.write_row(row)
                    total += len(rows)
            connection.commit()
        connection.autocommit = True
        connection.execute("VACUUM ANALYZE")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bulk_ledger")
    parser.add_argument("url", help="a migrated ledger: sqlite:///path or postgresql://...")
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--per-batch", type=int, default=10)
    options = parser.parse_args(argv)
    print(json.dumps(load(options.url, options.calls, options.per_batch)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
