"""The in-memory transport with the cluster's `Worker` wired in: what
`testing.memory_runtime` and the in-process tests run batches on. The
transport (runtime/transport/memory.py) holds the queue and the batch's state;
this module gives it the `Worker` that takes its messages, and the sweep's loop
(docs/architecture.md, "The batch's rules on a transport")."""

from __future__ import annotations

from runtime.gate.policy import PolicySources
from runtime.ledger.store import Ledger
from runtime.registry.capabilities import Registry
from runtime.settings import Settings
from runtime.transport.memory import WORKER, MemoryTransport
from runtime.worker.sweeper import start_sweeping
from runtime.worker.worker import Worker

SWEEP_SECONDS = 0.05


def memory_transport(
    *,
    registry: Registry,
    ledger: Ledger,
    settings: Settings,
    reads: int = 8,
    key: bytes | None = None,
    sweep: bool = True,
) -> MemoryTransport:
    """A `MemoryTransport` whose messages the same `Worker` as a Celery
    worker's runs, on `reads` threads for reads and one for the rest, signed
    with `key` (a fresh one if None); it sweeps every few hundredths of a
    second unless `sweep` is False, until it is closed."""

    def worker(transport: MemoryTransport) -> Worker:
        return Worker(
            settings=settings,
            registry=registry,
            ledger=ledger,
            key=transport.key,
            queue=transport,
            state=transport,
            name=WORKER,
        )

    limits = PolicySources(settings).limits
    transport = MemoryTransport(limits=limits, worker=worker, reads=reads, key=key)
    if sweep:
        start_sweeping(lambda: transport.worker, SWEEP_SECONDS, stop=transport.closed)
    return transport
