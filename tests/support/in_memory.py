"""The in-memory transport with its `Worker`, on the test tools and a SQLite
ledger of its own, for the tests that talk to the transport or the worker
directly (a whole `Runtime` on it is `runtime.testing.memory_runtime`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.transport.memory import MemoryTransport
from runtime.worker.in_memory import memory_transport
from tests.support.messages import KEY


@contextmanager
def in_memory(home: Path, *, sweep: bool = True, **settings) -> Iterator[MemoryTransport]:
    """A transport signing with `KEY`, its ledger in `home`, closed on the way
    out; `settings` as `Settings` takes them; the worker is `transport.worker`,
    its ledger `transport.worker.ledger`."""
    ledger = Ledger(f"sqlite:///{home / 'ledger.db'}")
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    transport = memory_transport(
        registry=registry,
        ledger=ledger,
        settings=Settings(home=home, **settings),
        key=KEY,
        sweep=sweep,
    )
    try:
        yield transport
    finally:
        transport.close()
        ledger.close()
