"""The orchestrator's side: `Runtime.submit(batch)` → a handle that streams
results as they finish and returns them in the model's order.

    rt = Runtime.from_env()
    handle = rt.submit([{"id": "1", "name": "read_file", "arguments": {"path": "a"}}],
                       mode="auto", workspace=".")
    for result in handle.stream(timeout=30): ...
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import redis
from pydantic import ValidationError

from runtime import adapters
from runtime.batch.handle import AsyncBatchHandle, BatchHandle
from runtime.batch.run import CANCEL_GRACE, BatchRun, Services
from runtime.errors import InvalidBatch
from runtime.gate import bindings
from runtime.gate.policy import PolicySources
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import Ledger
from runtime.registry.capabilities import Registry, load_tools
from runtime.settings import Settings, get_settings
from runtime.stack.record import redis_url_for, signing_key_for
from runtime.transport import channel
from runtime.transport.listener import Listener
from runtime.types import Batch, Mode, OnError, ToolCall

log = logging.getLogger("toolrun.client")
# How long close() waits for a batch: the cancel's grace for running calls, plus
# the time a wait for approval takes to see the cancel.
CLOSE_SECONDS = CANCEL_GRACE + 5.0
MAX_CALL_ID = 256  # characters; provider ids (toolu_..., call_...) are a few dozen


class Runtime:
    """A connection to a toolrun deployment: its Redis, its ledger, its registry."""

    def __init__(self, settings: Settings, *, registry: Registry | None = None) -> None:
        from workers.app import make_app

        self.settings = settings
        self.redis_url = redis_url_for(settings)
        self.registry = registry or load_tools(
            settings.module_names, mcp_servers_file=settings.mcp_servers_file
        )
        self.ledger = Ledger.from_settings(settings)
        self.app = make_app(settings, redis_url=self.redis_url)
        self.client = redis.Redis.from_url(self.redis_url)
        self.approvals = Approvals(self.ledger, self.client)
        self.policies = PolicySources(settings)  # org and user files: errors surface now
        bindings.check(self.policies.rules(), self.registry)  # and rules that cannot bind
        self._handles: list[BatchHandle] = []  # batches this runtime drives, until they end
        self._closed = False
        self.services = Services(
            registry=self.registry,
            approvals=self.approvals,
            app=self.app,
            client=self.client,
            listener=Listener(self.client),
            key=signing_key_for(settings),
            approval_timeout=settings.approval_timeout,
            max_argument_bytes=settings.max_argument_bytes,
        )

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
        rules: dict[str, list[str]] | None = None,
    ) -> BatchHandle:
        """Start a batch and return at once. Its policy (mode, workspace, the
        settings files' rules and `rules` of its own, as `{"allow": [...],
        "ask": [...], "deny": [...]}`) is fixed now."""
        batch = _batch(calls, mode=mode, workspace=workspace, on_error=on_error)
        policy = self.policies.policy_for(Path(batch.workspace), rules)
        bindings.check(policy.rules, self.registry)  # the project file's and the batch's
        handle = BatchHandle(batch, self.approvals)
        deadline = time.monotonic() + (timeout or self.settings.batch_timeout)
        handle._run = BatchRun(
            batch, policy, self.services, deadline=deadline, emit=handle._add,
            notify=handle._notice,
        )  # fmt: skip
        if self._closed:
            raise InvalidBatch("this Runtime is closed; make a new one to submit batches")
        handle._thread = threading.Thread(target=handle._run.run, name=f"batch-{batch.id}",
                                          daemon=True)  # fmt: skip
        self._handles = [*(h for h in self._handles if not h.done), handle]
        handle._thread.start()
        return handle

    def pending_approvals(self, batch_id: str | None = None) -> list:
        """Calls waiting for a human, from the ledger: any process sees them."""
        return self.approvals.pending(batch_id)

    def approve(self, batch_id: str, call_id: str, *, by: str,
                updated_arguments: Any = None) -> bool:  # fmt: skip
        """Let a waiting call run (with `updated_arguments`, validated again, if
        given). False if it was not waiting: already answered or expired."""
        return self.approvals.answer(batch_id, call_id, approve=True, by=by,
                                     updated_arguments=updated_arguments)  # fmt: skip

    def cancel(self, batch_id: str, *, by: str = "client") -> None:
        """Cancel a batch from any process that can reach its Redis."""
        channel.cancel(self.client, batch_id, by=by)

    def deny(self, batch_id: str, call_id: str, reason: str, *, by: str) -> bool:
        return self.approvals.answer(batch_id, call_id, approve=False, by=by, reason=reason)

    async def asubmit(
        self, calls: Batch | Iterable[ToolCall | dict], **options: Any
    ) -> AsyncBatchHandle:
        return AsyncBatchHandle(self.submit(calls, **options))

    def submit_message(
        self, message: Any, format: adapters.Format | None = None, **options: Any
    ) -> BatchHandle:
        """Start the tool calls of a provider message as the provider returned it
        (an Anthropic assistant message or its content list, an OpenAI chat
        message, Responses output items; an SDK object or its JSON), with
        `submit`'s options. `format` is detected when not given; the handle's
        `reply()` answers in the same dialect. No tool calls is `InvalidBatch`."""
        turn = adapters.parse(message, format)
        if not turn.calls:
            raise InvalidBatch("the message holds no tool calls to run")
        handle = self.submit(turn.calls, **options)
        handle.format = turn.format
        return handle

    async def asubmit_message(
        self, message: Any, format: adapters.Format | None = None, **options: Any
    ) -> AsyncBatchHandle:
        return AsyncBatchHandle(self.submit_message(message, format, **options))

    def close(self) -> None:
        """End this runtime's open batches, then let go of Redis and the ledger.

        Calls not yet started (a call waiting for approval too) end `cancelled`,
        saying the runtime was closed; calls running get a cancel's grace to
        end with their real result. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        open_handles = [handle for handle in self._handles if not handle.done]
        for handle in open_handles:
            try:  # the workers stop too: nothing queued for this batch starts
                channel.cancel(self.client, handle.batch_id, by="close")
            except channel.LOST as error:
                log.warning("batch %s: cannot tell the workers: %s", handle.batch_id, error)
            handle._run.close()
        for handle in open_handles:
            handle._thread.join(timeout=CLOSE_SECONDS)
        self.services.listener.close()
        self.client.close()
        self.ledger.close()


def _call(index: int, call: ToolCall | dict[str, Any]) -> ToolCall:
    """A call of the batch; one without a string id and name cannot get its
    result, so the batch is refused (bad arguments are the model's, and a result)."""
    try:
        call = call if isinstance(call, ToolCall) else ToolCall.model_validate(call)
    except ValidationError as error:
        fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'call'}: {e['msg']}"
                           for e in error.errors(include_url=False))  # fmt: skip
        raise InvalidBatch(
            f"call {index} of the batch is not a tool call "
            f'{{"id": str, "name": str, "arguments": ...}}: {fields}'
        ) from None
    if len(call.id) > MAX_CALL_ID or "\0" in call.id:  # the ledger keys rows by it
        raise InvalidBatch(
            f"call {index} of the batch has an id longer than {MAX_CALL_ID} characters "
            "or holding a NUL character; providers send short ids"
        )
    return call


def _batch(calls, *, mode, workspace, on_error) -> Batch:
    if isinstance(calls, Batch):
        overrides = {"mode": mode, "workspace": workspace, "on_error": on_error}
        batch = calls.model_copy(update={k: v for k, v in overrides.items() if v is not None})
        for index, call in enumerate(batch.calls):
            _call(index, call)
    else:
        batch = Batch(
            calls=[_call(index, c) for index, c in enumerate(calls)],
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
