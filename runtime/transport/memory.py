"""A transport in one process, for tests of the batch's rules (as dramatiq's
`StubBroker` or httpx's `MockTransport`): no Redis, no Celery, no worker
processes, and the same batch code on top (docs/architecture.md, "The batch's
rules on a transport").

What a worker does is done for real, on threads: each message is signed, then
checked again, claimed and run by the executor against the given ledger, and
a chain's next step is sent by the "worker" that ended the one before it. Reads
run side by side; every other call runs one at a time, in order, as on the
effects queue.

    transport = MemoryTransport(registry=registry, ledger=ledger, settings=settings)
    rt = Runtime(settings, registry=registry, ledger=ledger, transport=transport)
"""

from __future__ import annotations

import secrets
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from runtime.execution.executor import execute
from runtime.gate.admission import Admitted
from runtime.gate.policy import Policy
from runtime.ledger.store import Ledger
from runtime.registry.capabilities import Registry
from runtime.settings import Settings
from runtime.transport import chain
from runtime.transport.channel import Look
from runtime.transport.outbox import Outbox
from runtime.types import Batch, ToolResult

WORKER = "memory"


class MemoryTransport:
    def __init__(
        self, *, registry: Registry, ledger: Ledger, settings: Settings, reads: int = 8,
        key: bytes | None = None,
    ) -> None:  # fmt: skip
        self.registry, self.ledger, self.settings = registry, ledger, settings
        self.key = key or secrets.token_bytes(32)
        self._changed = threading.Condition()
        self._results: dict[str, dict[str, ToolResult]] = defaultdict(dict)
        self._deliveries: dict[tuple[str, str], int] = defaultdict(int)
        self._cancelled: dict[str, str] = {}
        self._handed_on: set[tuple[str, str]] = set()
        self._stash: dict[tuple[str, str], Any] = {}
        self._bells: dict[str, threading.Event] = defaultdict(threading.Event)
        self._reads = ThreadPoolExecutor(reads, thread_name_prefix="memory-reads")
        self._effects = ThreadPoolExecutor(1, thread_name_prefix="memory-effects")
        self.sent: list[dict[str, Any]] = []  # every message a worker took, in order

    # The batch's side.
    def sender(self, batch: Batch, policy: Policy) -> MemorySender:
        return MemorySender(self, batch, policy)

    def watch(self, batch_id: str) -> MemoryInbox:
        return MemoryInbox(self, batch_id)

    def unwatch(self, batch_id: str) -> None:
        pass

    def cancelled(self, batch_id: str) -> bool:
        return batch_id in self._cancelled

    def cancel(self, batch_id: str, *, by: str) -> None:
        with self._changed:
            self._cancelled.setdefault(batch_id, by)
            self._changed.notify_all()

    def close(self) -> None:
        for pool in (self._reads, self._effects):
            pool.shutdown(wait=False, cancel_futures=True)

    # Approvals' doorbell.
    def ring(self, batch_id: str, call_id: str) -> None:
        self._bells[batch_id].set()

    @contextmanager
    def listening(self, batch_id: str) -> Iterator[_Bell]:
        yield _Bell(self._bells[batch_id])

    def stash(self, batch_id: str, call_id: str, arguments: Any) -> None:
        self._stash[batch_id, call_id] = arguments

    def unstash(self, batch_id: str, call_id: str) -> Any | None:
        return self._stash.get((batch_id, call_id))

    # The worker's side: the board the executor reads, and the queues.
    def look(self, batch_id: str, call_id: str) -> Look:
        with self._changed:
            self._deliveries[batch_id, call_id] += 1
            return Look(batch_id in self._cancelled, self._deliveries[batch_id, call_id],
                        self._results[batch_id].get(call_id))  # fmt: skip

    def recall(self, batch_id: str, call_id: str) -> ToolResult | None:
        return self._results[batch_id].get(call_id)

    def arrived(self, batch_id: str, call_ids: set[str], timeout: float) -> list[ToolResult]:
        """Results of `call_ids` stored now or within `timeout` seconds (less if
        the batch is cancelled meanwhile)."""
        with self._changed:
            found = self._results[batch_id]
            if not call_ids & found.keys() and batch_id not in self._cancelled:
                self._changed.wait(timeout)
            return [found[call_id] for call_id in call_ids if call_id in found]

    def enqueue(self, message: dict[str, Any], *, parallel: bool) -> None:
        (self._reads if parallel else self._effects).submit(self._work, message)

    def _work(self, message: dict[str, Any]) -> None:
        """What `workers/tasks.py` does with a message."""
        self.sent.append(message)
        result = execute(message, registry=self.registry, ledger=self.ledger,
                         settings=self.settings, key=self.key, worker=WORKER,
                         board=self)  # fmt: skip
        if result is None:
            return
        batch_id = message["batch_id"]
        with self._changed:
            self._results[batch_id][result.call_id] = result
            self._changed.notify_all()
        following = chain.follow(message, result)
        step = (batch_id, message["call_id"])
        if following is not None and step not in self._handed_on:
            self._handed_on.add(step)
            self.enqueue(following, parallel=False)


class MemorySender(Outbox):
    """Signs each message as the real outbox does, and queues it in memory."""

    def __init__(self, transport: MemoryTransport, batch: Batch, policy: Policy) -> None:
        super().__init__(None, transport.key, batch, policy, reply_to=WORKER)
        self.transport = transport

    def send(
        self,
        admitted: list[Admitted],
        approved_by: dict[str, str],
        deadline: Callable[[], float],
        *,
        chained: bool = False,
    ) -> list[Admitted]:
        messages = [self.message(admission, approved_by) for admission in admitted]
        if chained and len(messages) > 1:
            self.transport.enqueue(chain.link(messages), parallel=False)
            return []
        for admission, message in zip(admitted, messages, strict=True):
            self.transport.enqueue(message, parallel=admission.spec.parallel)
        return []


class MemoryInbox:
    def __init__(self, transport: MemoryTransport, batch_id: str) -> None:
        self.transport, self.batch_id = transport, batch_id

    @property
    def cancelled(self) -> bool:
        return self.transport.cancelled(self.batch_id)

    def results(self, waiting: set[str], timeout: float) -> list[ToolResult]:
        return self.transport.arrived(self.batch_id, waiting, timeout)


class _Bell:
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def wait(self, timeout: float) -> None:
        self.event.wait(timeout)
        self.event.clear()
