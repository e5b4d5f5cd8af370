"""What every integration does with a model turn's calls: submit them as one
toolrun batch and wait until each call has either its final result or is
waiting for a person (docs/architecture.md, "Integrations"). A framework with
an approval flow of its own hands the waiting calls to it; the batch goes on
in the cluster and the answer reaches it through `Runtime.approve`/`deny`."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Collection, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from runtime.batch.notification import commands
from runtime.client import Runtime
from runtime.client.handle import AsyncBatchHandle, BatchHandle
from runtime.types import ApprovalRequested, Event, ToolResult


@dataclass(frozen=True)
class Options:
    """The policy a face submits its batches under, fixed when it is built:
    mode, workspace, rules of its own (`{"allow": [...], "deny": [...], "ask":
    [...]}`) and who the ledger says submitted them. `approval_wait`: seconds
    to wait for a person to answer before handing a waiting call back.
    `client_answers`: whether the person at the framework's side may answer
    the batch's approvals there (an MCP elicitation); the HTTP face allows it
    only to a key that may answer approvals."""

    mode: str | None = None
    workspace: str | Path | None = None
    rules: dict[str, list[str]] | None = None
    submitter: str | None = None
    approval_wait: float = 0.0
    client_answers: bool = True

    def submit(
        self, rt: Runtime, calls: Iterable[dict[str, Any]], key: str | None = None
    ) -> BatchHandle:
        """`key`: the same calls submitted again with it attach to the batch it
        started (a framework that runs a step again, as LangGraph does on resume)."""
        return rt.submit(list(calls), key=key, **self._policy())

    async def asubmit(
        self, rt: Runtime, calls: Iterable[dict[str, Any]], key: str | None = None
    ) -> AsyncBatchHandle:
        """`submit` on the event loop (`Runtime.asubmit`)."""
        return await rt.asubmit(list(calls), key=key, **self._policy())

    def _policy(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "workspace": self.workspace,
            "rules": self.rules,
            "submitter": self.submitter,
        }


@dataclass
class Outcome:
    """A batch as a face hands it back: the final results in, and the calls
    still waiting for a person, both by call id."""

    batch_id: str
    results: dict[str, ToolResult] = field(default_factory=dict)
    waiting: dict[str, ApprovalRequested] = field(default_factory=dict)

    def how_to_answer(self, call_id: str) -> str:
        """A model-readable result for a call that waits: what waits, why, and
        the commands a person answers it with."""
        notice = self.waiting[call_id]
        approve, deny = commands(self.batch_id, call_id)
        return (
            f"{notice.tool} was not run yet: it waits for a person's approval "
            f"({notice.reason}). Once approved it runs in batch {self.batch_id}; "
            f"a person answers with `{approve}` or `{deny}`."
        )


def settle(
    handle: BatchHandle, approval_wait: float = 0.0, answered: Collection[str] = ()
) -> Outcome:
    """Wait until every call of the batch has ended or waits for approval (a
    call in `answered`, just answered, counts only once it has ended); then,
    if some wait, up to `approval_wait` seconds more for people to answer.
    Nothing is ended here: a waiting call stays waiting in the cluster."""
    changed = threading.Event()

    def arrived(_event: object) -> None:
        changed.set()

    handle.subscribe(arrived)
    try:
        while True:
            changed.clear()
            finals, waiting = handle.so_far()
            asking = [notice for notice in waiting if notice.call_id not in answered]
            if len(finals) + len(asking) >= len(handle.batch.calls):
                break
            changed.wait()  # the batch's deadline ends every call, so this ends
    finally:
        handle.unsubscribe(arrived)
    if waiting and approval_wait > 0:
        handle.wait(approval_wait)
        finals, waiting = handle.so_far()
    return Outcome(
        handle.batch_id,
        {result.call_id: result for result in finals},
        {notice.call_id: notice for notice in waiting},
    )


def run(
    rt: Runtime, calls: Iterable[dict[str, Any]], options: Options, key: str | None = None
) -> Outcome:
    """Submit `calls` as one batch under `options` and settle it."""
    return settle(options.submit(rt, calls, key), options.approval_wait)


Seen = Callable[[Event], Awaitable[None]]


async def asettle(
    handle: AsyncBatchHandle,
    approval_wait: float = 0.0,
    answered: Collection[str] = (),
    seen: Seen | None = None,
) -> Outcome:
    """`settle` on the event loop: no thread waits for the batch. `seen` is
    awaited with each event as it arrives (a face's progress)."""
    calls = len(handle.handle.batch.calls)
    ended: set[str] = set()
    asking: set[str] = set()

    async def follow(until_all_end: bool) -> None:
        async with aclosing(handle.stream()) as events:
            async for event in events:
                if seen is not None:
                    await seen(event)
                if isinstance(event, ToolResult):
                    ended.add(event.call_id)
                    asking.discard(event.call_id)
                elif event.call_id not in answered and event.call_id not in ended:
                    asking.add(event.call_id)
                if len(ended) == calls or (not until_all_end and len(ended | asking) >= calls):
                    return

    await follow(until_all_end=False)  # the batch's deadline ends every call, so this ends
    if asking and approval_wait > 0:
        with anyio.move_on_after(approval_wait):
            await follow(until_all_end=True)
    finals, waiting = handle.handle.so_far()
    return Outcome(
        handle.batch_id,
        {result.call_id: result for result in finals},
        {notice.call_id: notice for notice in waiting},
    )


async def arun(
    rt: Runtime, calls: Iterable[dict[str, Any]], options: Options, key: str | None = None
) -> Outcome:
    """`run` on the event loop: `Runtime.asubmit`, then `asettle`."""
    return await asettle(await options.asubmit(rt, calls, key), options.approval_wait)


async def aattach(rt: Runtime, batch_id: str) -> AsyncBatchHandle:
    """`Runtime.attach` for the event loop: its ledger read runs on a thread."""
    return AsyncBatchHandle(await anyio.to_thread.run_sync(rt.attach, batch_id))
