"""A transport in one process, for tests of the batch's rules and of users'
own tools and agent loops (as dramatiq's `StubBroker` or httpx's
`MockTransport`): no Redis, no Celery, no worker processes, and the same batch
code on top (docs/architecture.md, "The batch's rules on a transport").

It implements both seams (`Queue`, `BatchState`) in memory, and hands each
message to the `Worker` the cluster runs, on its threads: the worker is wired in
by whoever builds the transport (`runtime/worker/in_memory.py`, as dramatiq's
test fixture starts a worker on its `StubBroker`), which decodes the message,
checks it again, claims and runs it against the ledger, publishes its end, hands
its chain on and moves the batch on exactly as a Celery worker does. Reads run
side by side; every other call runs one at a time, in order, as on the effects
queue.

    transport = memory_transport(registry=registry, ledger=ledger, settings=settings)
    rt = Runtime(settings, registry=registry, ledger=ledger, transport=transport)
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from runtime import clock
from runtime.errors import ConfigurationError
from runtime.flow.budgets import Counter
from runtime.flow.limits import Limits
from runtime.transport import chain
from runtime.transport.base import Known, Look, PlanCopy, Rider
from runtime.transport.memory_copies import MemoryCopies
from runtime.types import CallMessage, ToolResult

log = logging.getLogger("toolrun.memory")
WORKER = "memory"


class Runner(Protocol):
    """What takes a delivered message on the transport's threads: the
    cluster's `Worker` (runtime/worker/worker.py)."""

    def run(self, raw: dict[str, Any]) -> object: ...


class MemoryTransport(MemoryCopies):
    reply_to = WORKER
    throttle = None  # rates, caps and fair share need Redis ("Flow control")

    def __init__(
        self,
        *,
        limits: Limits,
        worker: Callable[[MemoryTransport], Runner],
        reads: int = 8,
        key: bytes | None = None,
    ) -> None:
        """`limits`: the org's and user's files' (rates, caps and fair share
        are refused here); `worker` builds what runs each message, given this
        transport (its queue and its state, with its `key`); `closed` is set
        by `close`, for the threads beside it (the sweep) to stop on."""
        refuse_flow_control(limits, "the org or user settings")
        super().__init__()
        self.key = key or secrets.token_bytes(32)
        self._changed = threading.Condition()
        self._results: dict[str, dict[str, ToolResult]] = defaultdict(dict)
        self._notices: dict[str, dict[str, ToolResult]] = defaultdict(dict)
        self._deliveries: dict[str, dict[str, int]] = defaultdict(dict)
        self._sent: dict[str, dict[str, float]] = defaultdict(dict)
        self._stages: dict[tuple[str, int], int] = defaultdict(int)
        self._cancelled: dict[str, str] = {}
        self._handed_on: set[tuple[str, str]] = set()
        self._spent: dict[str, float] = defaultdict(float)  # budget counters (no expiry here)
        self._arrivals: dict[str, list[Callable[[], None]]] = defaultdict(list)
        self._reads = ThreadPoolExecutor(reads, thread_name_prefix="memory-reads")
        self._effects = ThreadPoolExecutor(1, thread_name_prefix="memory-effects")
        self.closed = threading.Event()
        self.taken: list[CallMessage] = []  # every message a worker took, in order
        self.worker = worker(self)

    # The queue.
    def post(self, messages: list[CallMessage], *, parallel: bool, chained: bool = False) -> bool:
        if chained and len(messages) > 1:
            messages, parallel = [chain.link(messages)], False
        for message in messages:
            raw = message.wire() | {"sent_at": clock.now()}  # as the Celery queue stamps it
            (self._reads if parallel else self._effects).submit(self._work, raw)
        return True

    # The batch's state.
    def publish(
        self,
        batch_id: str,
        result: ToolResult,
        *,
        reply_to: str | None,
        stage: int | None = None,
        patience: float = 0.0,
        hold: tuple[str, float] | None = None,
        rider: Rider | None = None,
        drop_plan: bool = False,
    ) -> int | None:
        if rider is not None:  # nothing rides here: it goes on its own
            rider.landed(None)
        with self._changed:  # the end, then its lease (leases never wait for this lock)
            self._results[batch_id][result.call_id] = result
            if drop_plan:
                self.drop_plan(batch_id)
            self.release(batch_id, result.call_id)
            if hold is not None:  # a chain's next step
                self.hold(batch_id, hold[0], hold[1])
            if stage is not None:
                self._stages[batch_id, stage] += 1
            self._changed.notify_all()
            done = self._stages[batch_id, stage] if stage is not None else None
        self._arrived(batch_id)
        return done

    def stake(self, batch_id: str, result: ToolResult, *, patience: float = 0.0) -> bool:
        with self._changed:
            return self._results[batch_id].setdefault(result.call_id, result) is result

    def announce(self, batch_id: str, notice: ToolResult, *, reply_to: str | None) -> None:
        with self._changed:
            self._notices[batch_id][notice.call_id] = notice
            self._changed.notify_all()
        self._arrived(batch_id)

    def mark_sent(
        self,
        batch_id: str,
        call_ids: list[str],
        *,
        again: bool = False,
        plan: PlanCopy | None = None,
        record: str | bytes | None = None,
    ) -> list[str]:
        if plan is not None:
            self.keep_plan(batch_id, plan)
        if record is not None:
            self.keep_record(batch_id, record)
        with self._changed:
            marked = [c for c in call_ids if again or c not in self._sent[batch_id]]
            self._sent[batch_id].update(dict.fromkeys(marked, clock.now()))
            return marked

    def known(self, batch_id: str, call_ids: list[str]) -> Known:
        started, cancelled = self.started(batch_id), self.cancelled(batch_id)
        holds = self.holds(batch_id, call_ids)
        return Known(self.sent(batch_id), started, cancelled, self.ends(batch_id), holds)

    def sent(self, batch_id: str) -> dict[str, float]:
        return dict(self._sent[batch_id])

    def started(self, batch_id: str) -> set[str]:
        return set(self._deliveries[batch_id])

    def ends(self, batch_id: str) -> dict[str, ToolResult]:
        return dict(self._results[batch_id])

    def _arrived(self, batch_id: str) -> None:
        for callback in list(self._arrivals.get(batch_id, ())):
            callback()

    def watch(self, batch_id: str) -> MemoryInbox:
        return MemoryInbox(self, batch_id)

    def unwatch(self, batch_id: str) -> None:
        self._arrivals.pop(batch_id, None)

    def cancelled(self, batch_id: str) -> bool:
        return batch_id in self._cancelled

    def cancel(self, batch_id: str, *, by: str) -> None:
        with self._changed:
            self._cancelled.setdefault(batch_id, by)
            self._changed.notify_all()
        self._arrived(batch_id)

    def spend(self, calls: list[list[Counter]]) -> list[tuple[int, float] | None]:
        with self._changed:
            return [self._spend(counters) for counters in calls]

    def _spend(self, counters: list[Counter]) -> tuple[int, float] | None:
        for index, c in enumerate(counters):
            used = self._spent[c.key]
            if used + c.amount > c.limit or (c.amount == 0 and c.strict and used >= c.limit):
                return index, used
        for c in counters:
            self._spent[c.key] += c.amount
        return None

    def charge(self, counters: list[Counter]) -> None:
        with self._changed:
            for c in counters:
                self._spent[c.key] += c.amount

    def close(self) -> None:
        self.closed.set()
        for pool in (self._reads, self._effects):
            pool.shutdown(wait=False, cancel_futures=True)

    def forget(self, batch_id: str) -> None:
        """Lose what "Redis" held of a batch, as a restart without its
        append-only file does (its queued messages included)."""
        with self._changed:
            for kept in (self._results, self._notices, self._deliveries, self._sent):
                kept.pop(batch_id, None)

    def hand_on(self, batch_id: str, call_id: str) -> bool:
        with self._changed:
            if (batch_id, call_id) in self._handed_on:
                return False
            self._handed_on.add((batch_id, call_id))
            return True

    def look(
        self, batch_id: str, call_id: str, *, hold: float | None = None, rider: Rider | None = None
    ) -> Look:
        if rider is not None:  # nothing rides here: it goes on its own
            rider.landed(None)
        if hold is not None:
            self.hold(batch_id, call_id, hold)
        with self._changed:
            count = self._deliveries[batch_id][call_id] = (
                self._deliveries[batch_id].get(call_id, 0) + 1
            )
            return Look(batch_id in self._cancelled, count, self._results[batch_id].get(call_id))

    def unlook(self, batch_id: str, call_id: str) -> None:
        self.release(batch_id, call_id)
        with self._changed:
            count = self._deliveries[batch_id].pop(call_id, 1) - 1
            if count > 0:  # none: not taken, so the batch sends it again
                self._deliveries[batch_id][call_id] = count

    def recall(self, batch_id: str, call_id: str) -> ToolResult | None:
        return self._results[batch_id].get(call_id)

    def arrived(self, batch_id: str, call_ids: set[str], timeout: float) -> list[ToolResult]:
        """Ends (else notices) of `call_ids` stored now or within `timeout`."""
        with self._changed:
            if not call_ids & self._results[batch_id].keys() and batch_id not in self._cancelled:
                self._changed.wait(timeout)
            return self._found(batch_id, call_ids)

    def _found(self, batch_id: str, call_ids: set[str]) -> list[ToolResult]:
        ends, notices = self._results[batch_id], self._notices[batch_id]
        return [ends.get(c) or notices[c] for c in call_ids if c in ends or c in notices]

    def _work(self, raw: dict[str, Any]) -> None:
        """What a Celery worker does with a delivered message: the same `Worker`."""
        message = CallMessage.from_wire(raw)
        if message is not None:
            self.taken.append(message)
        try:
            self.worker.run(raw)
        except Exception:  # noqa: BLE001 - a pool would swallow it: say it
            log.exception("memory worker failed on %s", message.call_id if message else "?")


class MemoryInbox:
    def __init__(self, transport: MemoryTransport, batch_id: str) -> None:
        self.transport, self.batch_id = transport, batch_id

    @property
    def cancelled(self) -> bool:
        return self.transport.cancelled(self.batch_id)

    quick = True  # its results are in this process's memory

    def results(self, waiting: set[str], timeout: float) -> list[ToolResult]:
        return self.transport.arrived(self.batch_id, waiting, timeout)

    def on_arrival(self, callback: Callable[[], None]) -> None:
        self.transport._arrivals[self.batch_id].append(callback)


def refuse_flow_control(limits: Limits, where: str) -> None:
    """Rates, concurrency caps and fair share are held in Redis, across the
    cluster; one process has none of it (`throttle` is None). Rather than run
    a test as if they held, the in-process transport refuses them
    (docs/architecture.md, "Flow control"): sizes and budgets it keeps."""
    if found := limits.held_in_redis():
        raise ConfigurationError(
            f"{where} set {'; '.join(found)}, which the in-process transport "
            "(MemoryTransport, testing.memory_runtime) cannot hold: they need Redis. "
            "Point policy_file and user_settings_file at settings without them for "
            "these tests, or run them on a stack with Redis (`toolrun up`)."
        )
