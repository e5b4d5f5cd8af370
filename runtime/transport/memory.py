"""A transport in one process, for tests of the batch's rules (as dramatiq's
`StubBroker` or httpx's `MockTransport`): no Redis, no Celery, no worker
processes, and the same batch code on top (docs/architecture.md, "The batch's
rules on a transport").

What the cluster does is done for real, on threads: each message is checked
again, claimed and run by the executor against the given ledger; the "worker"
that ends a call announces it only if the ledger took its end, hands a chain
on, and carries the batch on when it ended a stage's last call; a sweep runs
every few hundredths of a second. Reads run side by side; every other call
runs one at a time, in order, as on the effects queue.

    transport = MemoryTransport(registry=registry, ledger=ledger, settings=settings)
    rt = Runtime(settings, registry=registry, ledger=ledger, transport=transport)
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from runtime.batch.advance import Advancer
from runtime.execution.executor import execute
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import Ledger
from runtime.registry.capabilities import Registry
from runtime.settings import Settings
from runtime.transport import chain
from runtime.transport.channel import Look
from runtime.types import ToolResult

log = logging.getLogger("toolrun.memory")
WORKER = "memory"
SWEEP_SECONDS = 0.05


class MemoryTransport:
    reply_to = WORKER

    def __init__(
        self, *, registry: Registry, ledger: Ledger, settings: Settings, reads: int = 8,
        key: bytes | None = None, sweep: bool = True,
    ) -> None:  # fmt: skip
        self.registry, self.ledger, self.settings = registry, ledger, settings
        self.key = key or secrets.token_bytes(32)
        self.advancer = Advancer(ledger=ledger, registry=registry, key=self.key, transport=self,
                                 approvals=Approvals(ledger, self.key))  # fmt: skip
        self._changed = threading.Condition()
        self._results: dict[str, dict[str, ToolResult]] = defaultdict(dict)
        self._notices: dict[str, dict[str, ToolResult]] = defaultdict(dict)
        self._deliveries: dict[str, dict[str, int]] = defaultdict(dict)
        self._sent: dict[str, dict[str, float]] = defaultdict(dict)
        self._stages: dict[tuple[str, int], int] = defaultdict(int)
        self._cancelled: dict[str, str] = {}
        self._plans: dict[str, dict[str, Any]] = {}
        self._handed_on: set[tuple[str, str]] = set()
        self._reads = ThreadPoolExecutor(reads, thread_name_prefix="memory-reads")
        self._effects = ThreadPoolExecutor(1, thread_name_prefix="memory-effects")
        self._closed = threading.Event()
        self.taken: list[dict[str, Any]] = []  # every message a worker took, in order
        if sweep:
            threading.Thread(target=self._sweep, name="memory-sweep", daemon=True).start()

    # What a batch's movers use.
    def post(self, messages: list[dict[str, Any]], *, parallel: bool, chained: bool = False
             ) -> bool:  # fmt: skip
        if chained and len(messages) > 1:
            messages, parallel = [chain.link(messages)], False
        for message in messages:
            (self._reads if parallel else self._effects).submit(self._work, message)
        return True

    def publish(self, batch_id: str, result: ToolResult, *, reply_to: str | None) -> None:
        with self._changed:
            self._results[batch_id][result.call_id] = result
            self._changed.notify_all()

    def announce(self, batch_id: str, notice: ToolResult, *, reply_to: str | None) -> None:
        with self._changed:
            self._notices[batch_id][notice.call_id] = notice
            self._changed.notify_all()

    def mark_sent(self, batch_id: str, call_ids: list[str], *, again: bool = False) -> list[str]:
        with self._changed:
            marked = [c for c in call_ids if again or c not in self._sent[batch_id]]
            self._sent[batch_id].update(dict.fromkeys(marked, time.time()))
            return marked

    def sent(self, batch_id: str) -> dict[str, float]:
        return dict(self._sent[batch_id])

    def started(self, batch_id: str) -> set[str]:
        return set(self._deliveries[batch_id])

    def keep_plan(self, batch_id: str, plan: dict[str, Any]) -> None:
        self._plans[batch_id] = plan

    def plan(self, batch_id: str) -> dict[str, Any] | None:
        return self._plans.get(batch_id)

    def ends(self, batch_id: str) -> dict[str, ToolResult]:
        return dict(self._results[batch_id])

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
        self._closed.set()
        for pool in (self._reads, self._effects):
            pool.shutdown(wait=False, cancel_futures=True)

    def forget(self, batch_id: str) -> None:
        """Lose what "Redis" held of a batch, as a restart without its
        append-only file does (its queued messages included)."""
        with self._changed:
            for kept in (self._results, self._notices, self._deliveries, self._sent):
                kept.pop(batch_id, None)

    # The board the executor reads.
    def look(self, batch_id: str, call_id: str) -> Look:
        with self._changed:
            count = self._deliveries[batch_id][call_id] = self._deliveries[batch_id].get(
                call_id, 0) + 1  # fmt: skip
            return Look(batch_id in self._cancelled, count, self._results[batch_id].get(call_id))

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

    def _work(self, message: dict[str, Any]) -> None:
        try:
            self._take(message)
        except Exception:  # noqa: BLE001 - a pool would swallow it: say it
            log.exception("memory worker failed on %s", message.get("call_id"))

    def _take(self, message: dict[str, Any]) -> None:
        """What `workers/tasks.py` does with a message."""
        self.taken.append(message)
        outcome = execute(message, registry=self.registry, ledger=self.ledger,
                          settings=self.settings, key=self.key, worker=WORKER,
                          board=self)  # fmt: skip
        if outcome is None or outcome.ended is False:
            return
        batch_id, result = message["batch_id"], outcome.result
        self.publish(batch_id, result, reply_to=None)
        with self._changed:
            self._stages[batch_id, message.get("stage")] += 1
            done = self._stages[batch_id, message.get("stage")]
        following = chain.follow(message, result)
        if following is not None and (batch_id, message["call_id"]) not in self._handed_on:
            self._handed_on.add((batch_id, message["call_id"]))
            self.post([following], parallel=False)
            return
        if done >= message.get("stage_size", 1) and not message.get("last_stage"):
            self.advancer.advance(batch_id)

    def _sweep(self) -> None:
        while not self._closed.wait(SWEEP_SECONDS):
            try:
                self.advancer.sweep()
            except Exception:  # noqa: BLE001, S112 - a sweep that failed runs again next time
                continue


class MemoryInbox:
    def __init__(self, transport: MemoryTransport, batch_id: str) -> None:
        self.transport, self.batch_id = transport, batch_id

    @property
    def cancelled(self) -> bool:
        return self.transport.cancelled(self.batch_id)

    def results(self, waiting: set[str], timeout: float) -> list[ToolResult]:
        return self.transport.arrived(self.batch_id, waiting, timeout)
