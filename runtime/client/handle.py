"""Batch handles: what `Runtime.submit` returns. Exactly one final result per
call, streamed as they finish (with an `ApprovalRequested` for each call that
waits for a human) or in the model's order, for threads and for asyncio. A
handle holds no thread: the runtime's follower fills its batch's events
(docs/architecture.md, "Following batches")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from runtime.errors import InvalidBatch
from runtime.types import ApprovalRequested, Event, ToolResult

if TYPE_CHECKING:  # not loaded with `Runtime` (docs/architecture.md, "Starting fast")
    from runtime import adapters
    from runtime.client.run import BatchRun, Services


class BatchHandle:
    """Results of one batch: exactly one per call, streamed or in order. The
    stream also yields an `ApprovalRequested` for a call waiting for approval,
    a notice that its final result follows; `results()` holds final ones only.
    Built on a `BatchRun` this process follows; several handles may share one.

    `owned`, `so_far`, `tally`, `kinds` and `unsubscribe` serve the HTTP
    gateway and the CLI (a batch's state without waiting, its usage without a
    ledger read, the provider item kinds of a reply); a program has `stream`,
    `results`, `usage` and the `as_*` replies for the same."""

    def __init__(self, run: BatchRun) -> None:
        self.batch = run.batch
        self.batch_id = run.batch.id
        self._run = run
        self._events = run.events

    @property
    def done(self) -> bool:
        """Whether every call has its final result (no wait)."""
        return self._events.done

    @property
    def owned(self) -> bool:
        """For the gateway: whether its submit wrote the gateway's owner row
        with the batch's record (if not, the gateway writes it itself)."""
        return self._run.owned

    @property
    def services(self) -> Services:
        """What the batch's runtime shares (its approvals, registry, transport)."""
        return self._run.services

    def approve(self, call_id: str, *, by: str, updated_arguments: Any = None) -> bool:
        """`Runtime.approve` for a call of this batch: let it run (with
        `updated_arguments`, validated again, if given). False if it was not
        waiting: already answered, or expired."""
        return answer(
            self._run.services,
            self.batch_id,
            call_id,
            approve=True,
            by=by,
            updated_arguments=updated_arguments,
        )

    def cancel(self, *, by: str = "client") -> None:
        """End the batch: calls not yet started end `cancelled`; calls running
        end with their real result, or after a short grace `cancelled` (reads)
        or `outcome_unknown` (side effects). Still exactly one result per call."""
        self._run.cancel(by=by)

    def deny(self, call_id: str, reason: str, *, by: str) -> bool:
        """`Runtime.deny` for a call of this batch: it ends `denied` with
        `reason`. False if it was not waiting: already answered, or expired."""
        return answer(
            self._run.services, self.batch_id, call_id, approve=False, by=by, reason=reason
        )

    def stream(self, timeout: float | None = None, *, notices: bool = True) -> Iterator[Event]:
        """Results as they finish, and (`notices`) an `ApprovalRequested` for
        each call that waits for a human. If `timeout` passes first, the batch
        ends at once and the calls still open get their `timeout`/
        `outcome_unknown` results, so the stream still yields one final result
        per call."""
        limit = None if timeout is None else time.monotonic() + timeout
        index, finals = 0, 0
        while finals < len(self.batch.calls):
            left = None if limit is None else limit - time.monotonic()
            if left is not None and left <= 0:
                self._run.end_now()
                limit = left = None
            fresh = self._events.after(index, left)
            index += len(fresh)
            for event in fresh:
                final = isinstance(event, ToolResult)
                finals += final
                if final or notices:
                    yield event

    def results(self, timeout: float | None = None) -> list[ToolResult]:
        """Every final result, in the model's order."""
        for _ in self.stream(timeout, notices=False):
            pass
        return [self._events.final(call.id) for call in self.batch.calls]

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every call has ended, without ending any; whether they have."""
        return self._events.wait_done(timeout)

    def subscribe(self, subscriber: Callable[[Event], None]) -> list[Event]:
        """Follow the batch without a thread of one's own: `subscriber` is
        called with every later event, on the thread that looks at the batch
        (a follower's driver, or the listener's as it routes a result: it must
        not block; hand the event on, as to an event loop with
        `loop.call_soon_threadsafe`). Returns the events in already, in the
        order they came, so none is missed or seen twice."""
        return self._events.subscribe(subscriber)

    def unsubscribe(self, subscriber: Callable[[Event], None]) -> None:
        """Stop calling a `subscribe`d function (the gateway's event streams,
        when their client goes; the async handle, when its loop closes). One
        not subscribed is ignored."""
        self._events.unsubscribe(subscriber)

    def so_far(self) -> tuple[list[ToolResult], list[ApprovalRequested]]:
        """For the gateway: the final results in, in the model's order, and the
        notices of calls still waiting for approval: a batch's state without
        waiting."""
        return self._events.so_far()

    def usage(self) -> dict[str, Any]:
        """What the batch has cost so far, from the ledger (docs/architecture.md,
        "Usage and budgets"): calls, worker, CPU, queue and approval seconds,
        money by the price table, what tools reported, the model's tokens.
        Each result's own is `result.usage`."""
        return self._run.services.approvals.ledger.batch_usage(self.batch_id)

    def tally(self, results: list[ToolResult]) -> dict[str, Any]:
        """For the gateway: `usage()` of these results (some of `so_far()`'s),
        summed here with no ledger read: for the ends it is given, the
        ledger's rollup agrees."""
        from runtime.ledger import usage

        redactor = self._run.services.approvals.ledger.redactor
        return usage.tally(results, self._run.tokens, redactor)

    format: adapters.Format | None = None
    """The provider dialect of a batch from `Runtime.submit_message`, which
    `reply()` answers in; None for `submit`."""

    def as_anthropic(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for every result; one Anthropic `user` message of `tool_result`
        blocks, in the order of the `tool_use` blocks."""
        return _reply("anthropic", self.results(timeout), self.kinds)

    def as_openai(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait for every result; one Chat Completions `role: "tool"` message per call."""
        return _reply("openai", self.results(timeout), self.kinds)

    def as_responses(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait for every result; one Responses `function_call_output` item per call."""
        return _reply("responses", self.results(timeout), self.kinds)

    @property
    def kinds(self) -> dict[str, str]:
        """For the gateway and the CLI's replies: each call's provider kind, so
        every call is answered with its own item."""
        return {call.id: call.kind for call in self.batch.calls}

    def reply(self, timeout: float | None = None) -> Any:
        """What to send the model next, in the dialect the message came in."""
        return _reply(_dialect(self), self.results(timeout), self.kinds)


class AsyncBatchHandle:
    """The same handle for asyncio: events reach the event loop through
    `loop.call_soon_threadsafe` from the thread that follows the batch, so no
    wait blocks the loop and no thread waits for a batch."""

    def __init__(self, handle: BatchHandle, offload: Executor | None = None) -> None:
        """`offload`: where the blocking work of a timeout (ending the open
        calls, in the ledger) runs; None: the loop's default executor."""
        self.handle = handle
        self.batch_id = handle.batch_id
        self._offload = offload
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._settled = asyncio.Event()  # every call has its final result
        for event in handle.subscribe(self._arrived):
            self._queue.put_nowait(event)
        if handle.done:
            self._settled.set()

    def _arrived(self, event: Event) -> None:
        """On the follower's thread: hand the event to the loop."""
        try:
            self._loop.call_soon_threadsafe(self._take, event)
        except RuntimeError:  # the loop is closed: nobody is left to read
            self.handle.unsubscribe(self._arrived)

    def _take(self, event: Event) -> None:
        self._queue.put_nowait(event)
        if self.handle.done:
            self._settled.set()

    async def _end_now(self) -> None:
        await self._loop.run_in_executor(self._offload, self.handle._run.end_now)

    async def stream(
        self, timeout: float | None = None, *, notices: bool = True
    ) -> AsyncIterator[Event]:
        """`BatchHandle.stream` on the event loop (`astream` is the same)."""
        loop = self._loop
        limit = None if timeout is None else loop.time() + timeout
        finals = 0
        while finals < len(self.handle.batch.calls):
            left = None if limit is None else max(0.0, limit - loop.time())
            try:
                event = await asyncio.wait_for(self._queue.get(), left)
            except TimeoutError:
                await self._end_now()
                limit = None
                continue
            final = isinstance(event, ToolResult)
            finals += final
            if final or notices:
                yield event

    def astream(
        self, timeout: float | None = None, *, notices: bool = True
    ) -> AsyncIterator[Event]:
        """`async for result in handle.astream()`: results as they finish, on the
        event loop, with an `ApprovalRequested` for a call waiting for a human."""
        return self.stream(timeout, notices=notices)

    async def as_anthropic(self, timeout: float | None = None) -> dict[str, Any]:
        """`BatchHandle.as_anthropic`, awaited."""
        return _reply("anthropic", await self.results(timeout), self.handle.kinds)

    async def as_openai(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """`BatchHandle.as_openai`, awaited."""
        return _reply("openai", await self.results(timeout), self.handle.kinds)

    async def as_responses(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """`BatchHandle.as_responses`, awaited."""
        return _reply("responses", await self.results(timeout), self.handle.kinds)

    async def reply(self, timeout: float | None = None) -> Any:
        """`BatchHandle.reply`, awaited."""
        return _reply(_dialect(self.handle), await self.results(timeout), self.handle.kinds)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.stream()

    async def results(self, timeout: float | None = None) -> list[ToolResult]:
        """Every final result, in the model's order; works after a stream too
        (it reads the handle's record, not the queue a stream consumes)."""
        if not self.handle.done:
            try:
                await asyncio.wait_for(self._settled.wait(), timeout)
            except TimeoutError:
                await self._end_now()
                await self._settled.wait()
        return self.handle.results()

    async def usage(self) -> dict[str, Any]:
        """`BatchHandle.usage`, read off the event loop."""
        return await self._loop.run_in_executor(self._offload, self.handle.usage)


def answer(services: Services, batch_id: str, call_id: str, **answer: Any) -> bool:
    """Answer an approval and carry its batch on from here: no process of the
    submitter needs to be alive. False if it was not waiting (answered, or
    expired: an expired approval cannot be answered)."""
    if not services.approvals.answer(batch_id, call_id, **answer):
        return False
    services.advancer.advance(batch_id)
    return True


def _reply(dialect: adapters.Format, results: list[ToolResult], kinds: dict[str, str]) -> Any:
    from runtime import adapters

    return adapters.reply(dialect, results, kinds)


def _dialect(handle: BatchHandle) -> adapters.Format:
    if handle.format is None:
        raise InvalidBatch(
            "this batch was not submitted as a provider message; "
            "use as_anthropic(), as_openai() or as_responses()"
        )
    return handle.format
