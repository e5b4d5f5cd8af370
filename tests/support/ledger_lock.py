"""A process that holds a ledger's write lock until told to let go, as an
operator's `sqlite3 ledger.db` with `BEGIN EXCLUSIVE` open would
(`python -m tests.support.ledger_lock URL`; it prints `held`, then lets go
when its stdin closes).

SQLite: the `sqlite3` module's own connection, `BEGIN EXCLUSIVE` (in WAL mode
readers still read). PostgreSQL: the migrators' advisory lock, as a long
`toolrun db upgrade` holds it, and every toolrun table in EXCLUSIVE mode
(writes wait, plain reads go on)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def hold(url: str) -> None:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        import sqlite3

        connection = sqlite3.connect(parsed.database, isolation_level=None, timeout=30)
        connection.execute("BEGIN EXCLUSIVE")
    else:
        import psycopg

        from runtime.ledger import schema

        dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        connection = psycopg.connect(dsn)  # a transaction is open until it commits
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (schema._LOCK_KEY,))
        for name in sorted(schema.metadata().tables):
            if name.startswith(schema.PREFIX):
                connection.execute(f'LOCK TABLE "{name}" IN EXCLUSIVE MODE')
    print("held", flush=True)
    sys.stdin.read()  # until the test closes it (or dies)
    connection.rollback()
    connection.close()


@contextmanager
def held_elsewhere(url: str) -> Iterator[subprocess.Popen]:
    """The ledger at `url` write-locked by another process until the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.ledger_lock", url],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        said = process.stdout.readline().strip()
        assert said == "held", f"the lock holder said {said!r} (exit {process.poll()})"
        yield process
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    hold(sys.argv[1])
