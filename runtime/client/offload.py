"""`Runtime`'s asyncio face: a submit's ledger and Redis work runs on one of
the runtime's few offload threads, never on the event loop, and its handle
waits there too (`AsyncBatchHandle`)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Self

from runtime.client.handle import AsyncBatchHandle, BatchHandle
from runtime.errors import InvalidBatch
from runtime.types import Batch, ToolCall

if TYPE_CHECKING:
    from runtime import adapters

OFFLOAD_THREADS = 2  # run `asubmit`'s blocking work off the event loop


class AsyncSubmits:
    """What `Runtime` is under asyncio; it gives `submit`, `submit_message`,
    `close`, the offload threads and whether it is closed."""

    _offload: ThreadPoolExecutor
    _closed: bool
    submit: Callable[..., BatchHandle]
    submit_message: Callable[..., BatchHandle]
    close: Callable[[], None]

    async def asubmit(
        self, calls: Batch | Iterable[ToolCall | dict], **options: Any
    ) -> AsyncBatchHandle:
        """`submit` for asyncio: its ledger and Redis work runs on one of the
        runtime's few offload threads, never on the event loop."""
        return await self._offloaded(functools.partial(self.submit, calls, **options))

    async def asubmit_message(
        self, message: Any, format: adapters.Format | None = None, **options: Any
    ) -> AsyncBatchHandle:
        """`submit_message` for asyncio: the calls of a provider message as the
        provider returned it, with `submit`'s options; its ledger and Redis work
        runs on one of the runtime's offload threads, never on the event loop.
        The handle's `reply()` answers in the message's dialect."""
        return await self._offloaded(
            functools.partial(self.submit_message, message, format, **options)
        )

    async def _offloaded(self, submit: Callable[[], BatchHandle]) -> AsyncBatchHandle:
        if self._closed:  # its offload threads are gone
            raise InvalidBatch("this Runtime is closed; make a new one to submit batches")
        handle = await asyncio.get_running_loop().run_in_executor(self._offload, submit)
        return AsyncBatchHandle(handle, self._offload)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Closes on a thread of the loop's executor: closing waits for the
        batches it cancelled to end."""
        await asyncio.get_running_loop().run_in_executor(None, self.close)
