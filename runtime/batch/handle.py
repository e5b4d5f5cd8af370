"""Batch handles: what `Runtime.submit` returns. Exactly one final result per
call, streamed as they finish (with notices of calls waiting for approval) or
in the model's order, for threads and for asyncio."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from runtime import adapters
from runtime.batch.run import BatchRun, Services
from runtime.errors import InvalidBatch
from runtime.types import Batch, Status, ToolResult


class BatchHandle:
    """Results of one batch: exactly one per call, streamed or in order. The
    stream also shows a call waiting for approval (status `awaiting_approval`),
    a notice that its final result follows; `results()` holds final ones only."""

    def __init__(self, batch: Batch, services: Services) -> None:
        self.batch = batch
        self.batch_id = batch.id
        self._services = services
        self._run: BatchRun | None = None
        self._thread: threading.Thread | None = None
        self._events: list[ToolResult] = []  # notices and final results, as they came
        self._final: dict[str, ToolResult] = {}
        self._changed = threading.Condition()
        self._listeners: list[Callable[[ToolResult], None]] = []

    @property
    def done(self) -> bool:
        return len(self._final) == len(self.batch.calls)

    def approve(self, call_id: str, *, by: str, updated_arguments: Any = None) -> bool:
        return answer(self._services, self.batch_id, call_id, approve=True, by=by,
                      updated_arguments=updated_arguments)  # fmt: skip

    def cancel(self, *, by: str = "client") -> None:
        """End the batch: calls not yet started end `cancelled`; calls running
        end with their real result, or after a short grace `cancelled` (reads)
        or `outcome_unknown` (side effects). Still exactly one result per call."""
        self._services.advancer.cancel(self.batch_id, by=by)

    def deny(self, call_id: str, reason: str, *, by: str) -> bool:
        return answer(self._services, self.batch_id, call_id, approve=False, by=by,
                      reason=reason)  # fmt: skip

    def stream(self, timeout: float | None = None, *, notices: bool = True) -> Iterator[ToolResult]:
        """Results as they finish. If `timeout` passes first, the batch ends at
        once and the calls still open get their `timeout`/`outcome_unknown`
        results, so the stream still yields one final result per call."""
        limit = None if timeout is None else time.monotonic() + timeout
        index, finals = 0, 0
        while finals < len(self.batch.calls):
            with self._changed:
                while index >= len(self._events):
                    left = None if limit is None else limit - time.monotonic()
                    if left is not None and left <= 0:
                        self._run.end_now()
                        left, limit = 1.0, None
                    self._changed.wait(left)
                fresh = self._events[index:]
            index += len(fresh)
            for event in fresh:
                final = event.status is not Status.awaiting_approval
                finals += final
                if final or notices:
                    yield event

    def results(self, timeout: float | None = None) -> list[ToolResult]:
        """Every final result, in the model's order."""
        for _ in self.stream(timeout, notices=False):
            pass
        return [self._final[call.id] for call in self.batch.calls]

    # The provider dialect of `Runtime.submit_message`; None for `submit`.
    format: adapters.Format | None = None

    def as_anthropic(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for every result; one Anthropic `user` message of `tool_result`
        blocks, in the order of the `tool_use` blocks."""
        return adapters.reply("anthropic", self.results(timeout), self.kinds)

    def as_openai(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait for every result; one Chat Completions `role: "tool"` message per call."""
        return adapters.reply("openai", self.results(timeout), self.kinds)

    def as_responses(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait for every result; one Responses `function_call_output` item per call."""
        return adapters.reply("responses", self.results(timeout), self.kinds)

    @property
    def kinds(self) -> dict[str, str]:
        """Each call's provider kind, so every call is answered with its own item."""
        return {call.id: call.kind for call in self.batch.calls}

    def reply(self, timeout: float | None = None) -> Any:
        """What to send the model next, in the dialect the message came in."""
        return adapters.reply(_dialect(self), self.results(timeout), self.kinds)

    def _add(self, result: ToolResult) -> None:
        with self._changed:
            self._final[result.call_id] = result
        self._publish(result)

    def _notice(self, result: ToolResult) -> None:
        self._publish(result)

    def _publish(self, result: ToolResult) -> None:
        with self._changed:
            self._events.append(result)
            self._changed.notify_all()
            listeners = list(self._listeners)
        for listener in listeners:
            listener(result)

    def _listen(self, listener: Callable[[ToolResult], None]) -> list[ToolResult]:
        """Call `listener` for every later event; returns those already in."""
        with self._changed:
            self._listeners.append(listener)
            return list(self._events)

    def _unlisten(self, listener: Callable[[ToolResult], None]) -> None:
        """Stop calling `listener` (a gateway's event stream that was closed)."""
        with self._changed:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def so_far(self) -> tuple[list[ToolResult], list[ToolResult]]:
        """The final results in, in the model's order, and the notices of calls
        still waiting for approval: a batch's state without waiting."""
        with self._changed:
            finals = [self._final[c.id] for c in self.batch.calls if c.id in self._final]
            waiting = {
                e.call_id: e
                for e in self._events
                if e.status is Status.awaiting_approval and e.call_id not in self._final
            }
        return finals, list(waiting.values())


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

    async def stream(
        self, timeout: float | None = None, *, notices: bool = True
    ) -> AsyncIterator[ToolResult]:
        loop = asyncio.get_running_loop()
        limit = None if timeout is None else loop.time() + timeout
        finals = 0
        while finals < len(self.handle.batch.calls):
            left = None if limit is None else max(0.0, limit - loop.time())
            try:
                event = await asyncio.wait_for(self._queue.get(), left)
            except TimeoutError:
                self.handle._run.end_now()
                limit = None
                continue
            final = event.status is not Status.awaiting_approval
            finals += final
            if final or notices:
                yield event

    def astream(
        self, timeout: float | None = None, *, notices: bool = True
    ) -> AsyncIterator[ToolResult]:
        """`async for result in handle.astream()`: results as they finish, on the
        event loop (the batch's one thread hands them over; no thread per call)."""
        return self.stream(timeout, notices=notices)

    async def as_anthropic(self, timeout: float | None = None) -> dict[str, Any]:
        return adapters.reply("anthropic", await self._settled(timeout), self.handle.kinds)

    async def as_openai(self, timeout: float | None = None) -> list[dict[str, Any]]:
        return adapters.reply("openai", await self._settled(timeout), self.handle.kinds)

    async def as_responses(self, timeout: float | None = None) -> list[dict[str, Any]]:
        return adapters.reply("responses", await self._settled(timeout), self.handle.kinds)

    async def reply(self, timeout: float | None = None) -> Any:
        return adapters.reply(_dialect(self.handle), await self._settled(timeout),
                              self.handle.kinds)  # fmt: skip

    async def _settled(self, timeout: float | None) -> list[ToolResult]:
        """Every final result in order, waiting on the loop without taking
        anything from the queue `stream` reads (it may have been read already)."""
        loop = asyncio.get_running_loop()
        settled = asyncio.Event()
        self.handle._listen(lambda _: self.handle.done and loop.call_soon_threadsafe(settled.set))
        if not self.handle.done:
            try:
                await asyncio.wait_for(settled.wait(), timeout)
            except TimeoutError:
                self.handle._run.end_now()
                await settled.wait()
        return self.handle.results()

    def __aiter__(self) -> AsyncIterator[ToolResult]:
        return self.stream()

    async def results(self, timeout: float | None = None) -> list[ToolResult]:
        """Every final result, in the model's order; works after a stream too
        (it reads the handle's record, not the queue a stream consumes)."""
        if self.handle.done:
            return self.handle.results()
        return await asyncio.to_thread(self.handle.results, timeout)


def answer(services: Services, batch_id: str, call_id: str, **answer: Any) -> bool:
    """Answer an approval and carry its batch on from here: no process of the
    submitter needs to be alive. False if it was not waiting (answered, or
    expired: an expired approval cannot be answered)."""
    if not services.approvals.answer(batch_id, call_id, **answer):
        return False
    services.advancer.advance(batch_id)
    return True


def _dialect(handle: BatchHandle) -> adapters.Format:
    if handle.format is None:
        raise InvalidBatch(
            "this batch was not submitted as a provider message; "
            "use as_anthropic(), as_openai() or as_responses()"
        )
    return handle.format
