"""A batch's results as Server-Sent Events, and the long poll's wait
(docs/architecture.md, "The HTTP gateway").

One event per result as it ends (`event: result`, a `ToolResult`), a notice
for a call waiting for approval (`event: notice`, an `ApprovalRequested`:
call_id, tool, reason) and a last `event: end`. An event's id says what the
stream has sent so far, in the model's order and not in the order this process
learnt the results (runtime/gateway/cursors.py): a client that reconnects with
`Last-Event-ID` gets what the stream had not sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

from runtime.client.handle import BatchHandle
from runtime.gateway.auth import RECHECK
from runtime.gateway.cursors import Cursors, Ids
from runtime.gateway.problems import Unauthorized
from runtime.redaction import redact
from runtime.types import Event, ToolResult

Alive = Callable[[], Awaitable[bool]]  # whether the request's key is still live


async def _always() -> bool:
    return True


def body(event: Event) -> dict:
    return redact(event.model_dump(mode="json"))


async def stream(
    handle: BatchHandle,
    sent: int,
    *,
    on_event: Callable[[], None] = lambda: None,
    alive: Alive = _always,
    cursors: Cursors | None = None,
) -> AsyncIterator[dict]:
    """The events `sent` lacks, as sse-starlette's dicts, until every call has
    ended, or until `alive` says the key was revoked: then the stream stops
    without `end` (a reconnect is a 401)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Event] = asyncio.Queue()

    def listener(event: Event) -> None:  # on the thread that follows the batch
        loop.call_soon_threadsafe(queue.put_nowait, event)

    for event in handle.subscribe(listener):  # later events queue behind these (same loop turn)
        queue.put_nowait(event)
    index = {call.id: i for i, call in enumerate(handle.batch.calls)}
    ids = Ids(cursors or Cursors(), len(index), sent)
    finals = sum(ids.finals)
    try:
        while finals < len(index):
            try:
                event = await asyncio.wait_for(queue.get(), RECHECK)
            except TimeoutError:
                event = None
            if not await alive():
                return
            if event is None:
                continue
            position = index.get(event.call_id)
            if position is None:
                continue
            final = isinstance(event, ToolResult)
            number = 2 * position + final
            bit, final_bit = 1 << number, 1 << (2 * position + 1)
            if sent & bit or sent & final_bit:  # sent already, or a notice after its end
                continue
            sent |= bit
            finals += final
            on_event()
            yield {
                "id": ids.next(sent, number),
                "event": "result" if final else "notice",
                "data": json.dumps(body(event)),
            }
        yield {"event": "end", "data": json.dumps({"batch_id": handle.batch_id})}
    finally:
        handle.unsubscribe(listener)


async def settled(handle: BatchHandle, seconds: float, alive: Alive = _always) -> None:
    """Wait until every call of the batch has ended, or `seconds` pass; a 401
    as soon as `alive` says the key was revoked."""
    if handle.done or seconds <= 0:
        return
    loop = asyncio.get_running_loop()
    # A future, not an `asyncio.Event` awaited by `wait_for`, which made a
    # task of each wait (docs/architecture.md, "The HTTP gateway").
    ended = loop.create_future()

    def listener(_: Event) -> None:
        if handle.done:
            loop.call_soon_threadsafe(_end, ended)

    handle.subscribe(listener)
    until = loop.time() + seconds
    try:
        while not handle.done and loop.time() < until:
            await asyncio.wait((ended,), timeout=min(RECHECK, until - loop.time()))
            if handle.done:
                return
            if not await alive():
                raise Unauthorized("the API key was revoked while the request waited")
    finally:
        handle.unsubscribe(listener)


def _end(ended: asyncio.Future) -> None:
    if not ended.done():
        ended.set_result(None)
