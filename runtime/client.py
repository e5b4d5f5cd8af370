"""The orchestrator's side: `Runtime.submit(batch)` → a handle that streams
results as they finish and returns them in the model's order.

    rt = Runtime.from_env()
    handle = rt.submit([{"id": "1", "name": "read_file", "arguments": {"path": "a"}}],
                       mode="auto", workspace=".")
    for result in handle.stream(timeout=30): ...
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import redis

from runtime.dispatcher import BatchRun
from runtime.errors import InvalidBatch
from runtime.ledger import Ledger
from runtime.registry import Registry, load_tools
from runtime.settings import Settings, get_settings
from runtime.stack_record import redis_url_for
from runtime.types import Batch, Mode, OnError, ToolCall, ToolResult


class Runtime:
    """A connection to a toolrun deployment: its Redis, its ledger, its registry."""

    def __init__(self, settings: Settings, *, registry: Registry | None = None) -> None:
        from workers.app import make_app

        self.settings = settings
        self.redis_url = redis_url_for(settings)
        self.registry = registry or load_tools(settings.module_names)
        self.ledger = Ledger(settings.ledger_url)
        self.app = make_app(settings, redis_url=self.redis_url)
        self.client = redis.Redis.from_url(self.redis_url)

    @classmethod
    def from_env(cls) -> Runtime:
        return cls(get_settings())

    def submit(
        self,
        calls: Batch | Iterable[ToolCall | dict[str, Any]],
        *,
        mode: Mode | str | None = None,
        workspace: str | Path | None = None,
        on_error: OnError | None = None,
        timeout: float | None = None,
    ) -> BatchHandle:
        """Start a batch and return at once. The policy (mode, workspace) is fixed now."""
        batch = _batch(calls, mode=mode, workspace=workspace, on_error=on_error)
        handle = BatchHandle(batch)
        deadline = time.monotonic() + (timeout or self.settings.batch_timeout)
        handle._run = BatchRun(
            batch,
            registry=self.registry,
            ledger=self.ledger,
            app=self.app,
            client=self.client,
            deadline=deadline,
            emit=handle._add,
        )
        threading.Thread(target=handle._run.run, name=f"batch-{batch.id}", daemon=True).start()
        return handle

    async def asubmit(
        self, calls: Batch | Iterable[ToolCall | dict], **options: Any
    ) -> AsyncBatchHandle:
        return AsyncBatchHandle(self.submit(calls, **options))

    def close(self) -> None:
        self.client.close()
        self.ledger.close()


class BatchHandle:
    """Results of one batch: exactly one per call, streamed or in order."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.batch_id = batch.id
        self._run: BatchRun | None = None
        self._finished: list[ToolResult] = []
        self._changed = threading.Condition()
        self._listeners: list[Callable[[ToolResult], None]] = []

    @property
    def done(self) -> bool:
        return len(self._finished) == len(self.batch.calls)

    def stream(self, timeout: float | None = None) -> Iterator[ToolResult]:
        """Results as they finish. If `timeout` passes first, the batch ends at
        once and the calls still open get their `timeout`/`outcome_unknown`
        results, so the stream still yields one result per call."""
        limit = None if timeout is None else time.monotonic() + timeout
        index = 0
        while index < len(self.batch.calls):
            with self._changed:
                while index >= len(self._finished):
                    left = None if limit is None else limit - time.monotonic()
                    if left is not None and left <= 0:
                        self._run.end_now()
                        left = 1.0
                        limit = None
                    self._changed.wait(left)
                batch = self._finished[index:]
            index += len(batch)
            yield from batch

    def results(self, timeout: float | None = None) -> list[ToolResult]:
        """Every result, in the model's order."""
        finished = {result.call_id: result for result in self.stream(timeout)}
        return [finished[call.id] for call in self.batch.calls]

    def _add(self, result: ToolResult) -> None:
        with self._changed:
            self._finished.append(result)
            self._changed.notify_all()
            listeners = list(self._listeners)
        for listener in listeners:
            listener(result)

    def _listen(self, listener: Callable[[ToolResult], None]) -> list[ToolResult]:
        """Call `listener` for every later result; returns those already in."""
        with self._changed:
            self._listeners.append(listener)
            return list(self._finished)


class AsyncBatchHandle:
    """The same handle for asyncio: results arrive on the event loop without a
    thread per call or a blocking wait."""

    def __init__(self, handle: BatchHandle) -> None:
        self.handle = handle
        self.batch_id = handle.batch_id
        self._queue: asyncio.Queue[ToolResult] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        for result in handle._listen(
            lambda r: loop.call_soon_threadsafe(self._queue.put_nowait, r)
        ):
            self._queue.put_nowait(result)

    async def stream(self, timeout: float | None = None) -> AsyncIterator[ToolResult]:
        limit = None if timeout is None else asyncio.get_running_loop().time() + timeout
        for _ in self.handle.batch.calls:
            left = None if limit is None else max(0.0, limit - asyncio.get_running_loop().time())
            try:
                yield await asyncio.wait_for(self._queue.get(), left)
            except TimeoutError:
                self.handle._run.end_now()
                limit = None
                yield await self._queue.get()

    def __aiter__(self) -> AsyncIterator[ToolResult]:
        return self.stream()

    async def results(self, timeout: float | None = None) -> list[ToolResult]:
        finished = {result.call_id: result async for result in self.stream(timeout)}
        return [finished[call.id] for call in self.handle.batch.calls]


def _batch(calls, *, mode, workspace, on_error) -> Batch:
    if isinstance(calls, Batch):
        overrides = {"mode": mode, "workspace": workspace, "on_error": on_error}
        batch = calls.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    else:
        batch = Batch(
            calls=[c if isinstance(c, ToolCall) else ToolCall.model_validate(c) for c in calls],
            mode=Mode(mode or Mode.default),
            workspace=str(workspace or "."),
            on_error=on_error or "stop",
        )
    ids = [call.id for call in batch.calls]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InvalidBatch(f"duplicate call ids in batch: {', '.join(duplicates)}")
    root = Path(batch.workspace)
    if not root.is_dir():
        raise InvalidBatch(f"workspace {batch.workspace!r} is not a directory")
    return batch.model_copy(update={"workspace": str(root.resolve())})
