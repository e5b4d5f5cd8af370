"""The orchestrator's side: `Runtime.submit(batch)` → a handle that streams
results as they finish and returns them in the model's order.

    rt = Runtime.from_env()
    handle = rt.submit([{"id": "1", "name": "read_file", "arguments": {"path": "a"}}],
                       mode="auto", workspace=".")
    for result in handle.stream(timeout=30): ...
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime import clock, config
from runtime.client.offload import OFFLOAD_THREADS, AsyncSubmits
from runtime.errors import InvalidBatch, StackError
from runtime.settings import Settings, get_settings
from runtime.types import Batch, Mode, OnError, ToolCall

if TYPE_CHECKING:
    from runtime import adapters
    from runtime.client.handle import BatchHandle
    from runtime.keyring import Purpose
    from runtime.ledger.store import Ledger
    from runtime.ledger.tables import RememberedRuleRow
    from runtime.registry.capabilities import Registry
    from runtime.transport.base import Transport

# What a deployment needs (the ledger and SQLAlchemy, Celery, Redis, the batch
# machinery) is imported when a `Runtime` is built, not with the class:
# `from runtime import Runtime` stays under a second (docs/architecture.md, "Starting fast").
# How long close() waits, in all, beyond a cancel's grace for calls still running,
# for the worker's sweep (once a second) to end those and for their ends to
# reach this process.
CLOSE_AFTER_GRACE = 3.0


class Runtime(AsyncSubmits):
    """A connection to a toolrun deployment: its Redis, its ledger, its registry."""

    def __init__(
        self,
        settings: Settings,
        *,
        registry: Registry | None = None,
        transport: Transport | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        """`transport` defaults to Celery and Redis from `settings`; tests pass
        `runtime.worker.in_memory.memory_transport` to run batches in process.
        What it is connected to is its own: `settings`, `registry`, `ledger`
        and `policies` may be read; a process that serves the cluster reads
        the rest through `deployment` (docs/architecture.md, "Assembly")."""
        from runtime import tracing
        from runtime.assembly.deployment import Deployment
        from runtime.assembly.parts import advancer, client_transport
        from runtime.client.follower import Follower
        from runtime.client.run import Services
        from runtime.gate import bindings
        from runtime.gate.policy import PolicySources
        from runtime.ledger.approvals import Approvals
        from runtime.ledger.store import Ledger
        from runtime.tools.loading import load_tools
        from runtime.transport.reachability import require_reachable

        self.settings = settings
        # The deployment first: a client that finds none writes nothing (no ledger file).
        url = None if transport is not None else config.redis_url(settings)
        tracing.configure()  # from OTEL_*, unless the application set tracing up itself
        self.registry = registry or load_tools(
            settings.module_names, mcp_servers_file=settings.mcp_servers_file
        )
        self.ledger = ledger or Ledger.from_settings(settings)
        on_celery = None  # the transport, when this runtime built it on Celery and Redis
        if transport is None:
            transport = on_celery = client_transport(settings, url, redactor=self.ledger.redactor)
        try:
            key = transport.key or config.signing_key(settings)
        except StackError:
            if url is not None:  # a Redis that does not answer explains it better
                require_reachable(settings)
            raise
        self._transport = transport
        self._approvals = Approvals(self.ledger, key)
        self.policies = PolicySources(settings)  # org and user files: errors surface now
        bindings.check(self.policies.rules(), self.registry)  # and rules that cannot bind
        self.deployment = Deployment(self.ledger, self._approvals, on_celery, url)
        self._follower = Follower()  # every open batch of this runtime, on a few threads
        self._offload = ThreadPoolExecutor(OFFLOAD_THREADS, thread_name_prefix="toolrun-offload")
        self._closed = False
        self._services = Services(
            registry=self.registry,
            approvals=self._approvals,
            transport=transport,
            advancer=advancer(
                settings,
                ledger=self.ledger,
                registry=self.registry,
                key=key,
                queue=transport,
                state=transport,
                approvals=self._approvals,
                notifiers=self.policies.notifiers,
            ),
            key=key,
            approval_timeout=settings.approval_timeout,
            max_argument_bytes=settings.max_argument_bytes,
        )

    @classmethod
    def from_env(cls) -> Runtime:
        """The deployment the environment names (`TOOLRUN_*`, else the embedded
        stack's record), once it answers: StackError within seconds, naming what
        does not answer, rather than submits that wait for it."""
        from runtime.transport.reachability import require_reachable

        settings = get_settings()
        require_reachable(settings)
        return cls(settings)

    def submit(
        self,
        calls: Batch | Iterable[ToolCall | dict[str, Any]],
        *,
        mode: Mode | str | None = None,
        workspace: str | Path | None = None,
        on_error: OnError | None = None,
        timeout: float | None = None,
        rules: dict[str, list[str]] | None = None,
        key: str | None = None,
        conversation: str | None = None,
        submitter: str | None = None,
        traceparent: str | None = None,
    ) -> BatchHandle:
        """Start a batch and return at once; from then on it belongs to the
        cluster and goes on without this process. Its policy (mode, workspace,
        the settings files' rules and `rules` of its own, as `{"allow": [...],
        "ask": [...], "deny": [...]}`) is fixed now. With `key`, submitting
        the same batch again (from any process, after any crash, however
        many at once) attaches to the batch the key started and writes or
        runs nothing again; the same key with other calls, mode, workspace,
        `on_error` or policy is `KeyConflict` (an `InvalidBatch`).

        `conversation`: the batches of one conversation are chained, each
        transcript to the one before it (docs/architecture.md, "Transcripts");
        `submitter`: who the ledger says submitted it (default: user@host).
        The batch's trace is the caller's current OpenTelemetry context, or
        `traceparent` (W3C) when given (docs/architecture.md, "Traces and
        metrics")."""
        return self._submit(
            calls,
            mode=mode,
            workspace=workspace,
            on_error=on_error,
            timeout=timeout,
            rules=rules,
            key=key,
            conversation=conversation,
            submitter=submitter,
            traceparent=traceparent,
        )

    def _submit(
        self,
        calls: Batch | Iterable[ToolCall | dict[str, Any]],
        *,
        mode: Mode | str | None = None,
        workspace: str | Path | None = None,
        on_error: OnError | None = None,
        timeout: float | None = None,
        rules: dict[str, list[str]] | None = None,
        key: str | None = None,
        conversation: str | None = None,
        submitter: str | None = None,
        traceparent: str | None = None,
        format: adapters.Format | None = None,
        model_usage: dict[str, Any] | None = None,
        owner: dict[str, Any] | None = None,
    ) -> BatchHandle:
        from runtime import tracing
        from runtime.client.attach import known_row, lost_race
        from runtime.client.fingerprint import check_key
        from runtime.client.handle import BatchHandle
        from runtime.client.intake import link
        from runtime.client.run import BatchRun
        from runtime.client.submission import submission
        from runtime.gate import bindings

        found = submission(
            calls,
            policies=self.policies,
            ledger=self.ledger,
            registry=self.registry,
            in_redis=self._services.transport.throttle is not None,
            mode=mode,
            workspace=workspace,
            on_error=on_error,
            rules=rules,
            key=key,
            conversation=conversation,
            submitter=submitter,
        )
        batch, policy, submitter = found.batch, found.policy, found.submitter
        if key is not None and (known := known_row(self.ledger, batch.id)) is not None:
            check_key(known, batch, policy, key)
            return self.attach(batch.id)
        if self._closed:
            raise InvalidBatch("this Runtime is closed; make a new one to submit batches")
        bindings.check(policy.rules, self.registry)  # the project file's and the batch's
        run = BatchRun(batch, self._services)
        deadline = clock.now() + (timeout or self.settings.batch_timeout)
        columns = {"submitter": submitter, "format": format, **(model_usage or {})}
        if conversation is not None:
            columns |= link(self.ledger, conversation)
        parent = tracing.traceparent(traceparent)
        with tracing.batch_span(batch.id, len(batch.calls), batch.mode.value, parent) as trace:
            started = run.start(
                policy,
                deadline=deadline,
                key=key,
                columns=columns,
                traceparent=trace,
                open_cap=found.open_cap,
                owner=owner,
            )
        if not started:  # a racing submitter of `key` won
            return lost_race(self._follower, self._services, batch, policy, key)
        self._follower.follow(run)
        return BatchHandle(run)

    def attach(self, batch_id: str) -> BatchHandle:
        """A handle on a batch submitted from any process, alive or not: the
        results that have ended, then those still to come."""
        from runtime.client.attach import attached

        return attached(self._follower, self._services, self.ledger, batch_id)

    def transcript(self, batch_id: str) -> dict[str, Any]:
        """The batch's transcript from the ledger (`toolrun.transcript/1`),
        sealed under this runtime's signing key with the check of its rows
        against the seal its batch's end made (docs/architecture.md,
        "Transcripts"); `runtime.transcript.render` writes it as text."""
        from runtime.transcript import build as build_transcript
        from runtime.transcript import seal

        document = build_transcript(self.ledger, batch_id)
        if document is None:
            raise InvalidBatch(f"no batch {batch_id!r} in the ledger")
        rows = self.ledger.rows_check(batch_id, self._services.key)  # against the end's seal
        return seal(document, self._services.key, rows)

    def pending_approvals(self, batch_id: str | None = None) -> list:
        """Calls waiting for a human, from the ledger: any process sees them."""
        return self._approvals.pending(batch_id)

    def approve(
        self, batch_id: str, call_id: str, *, by: str, updated_arguments: Any = None
    ) -> bool:
        """Let a waiting call run (with `updated_arguments`, validated again, if
        given), and carry its batch on from here. False if it was not waiting:
        already answered, or expired."""
        from runtime.client.handle import answer

        options = {"by": by, "updated_arguments": updated_arguments}
        return answer(self._services, batch_id, call_id, approve=True, **options)

    def remember(self, batch_id: str, call_id: str, **options: Any) -> RememberedRuleRow | None:
        """Approve a waiting call and remember a rule for calls like it, with
        `approve_and_remember`'s options (docs/architecture.md, "Remembered
        rules"); None if it was not waiting."""
        from runtime.client.remembering import approve_and_remember

        return approve_and_remember(self._services, batch_id, call_id, **options)

    def key_for(self, purpose: Purpose) -> bytes:
        """This deployment's key for one purpose, derived from its signing key
        (which never leaves the Runtime): the gateway's page signs its
        sessions and CSRF tokens with theirs (docs/architecture.md, "The
        approvals page")."""
        from runtime.keyring import derived

        return derived(self._services.key, purpose)

    def cancel(self, batch_id: str, *, by: str = "client") -> None:
        """Cancel a batch from any process that can reach its Redis and ledger."""
        self._services.advancer.cancel(batch_id, by=by)

    def deny(self, batch_id: str, call_id: str, reason: str, *, by: str) -> bool:
        """Refuse a waiting call: it ends `denied` with `reason` (what the model
        reads), recorded as answered `by`, and its batch is carried on from
        here. False if it was not waiting: already answered, or expired."""
        from runtime.client.handle import answer

        return answer(self._services, batch_id, call_id, approve=False, by=by, reason=reason)

    def submit_message(
        self, message: Any, format: adapters.Format | None = None, **options: Any
    ) -> BatchHandle:
        """Start the tool calls of a provider message as the provider returned it
        (an Anthropic assistant message or its content list, an OpenAI chat
        message, Responses output items; an SDK object or its JSON), with
        `submit`'s options. `format` is detected when not given; the handle's
        `reply()` answers in the same dialect. No tool calls is `InvalidBatch`.
        A whole response that carries `usage` has its model's tokens kept with
        the batch (docs/architecture.md, "Usage and budgets"). Without `key`,
        the turn's key is made of the provider's call ids and scoped to its
        `submitter` (default user@host): the same turn again from the same
        submitter attaches, from another it is a batch of its own
        (docs/architecture.md, "Attach and keys")."""
        from runtime.client.submission import turn_of

        turn = turn_of(self.ledger, message, format, options)  # and the turn's key in `options`
        handle = self._submit(turn.calls, format=turn.format, model_usage=turn.usage, **options)
        handle.format = turn.format
        return handle

    def close(self, *, cancel: bool = True) -> None:
        """End this runtime's open batches, then let go of Redis and the ledger.

        A batch whose submitter simply dies goes on in the cluster; closing says
        this process is done with its batches. Calls not yet started (a call
        waiting for approval too) end `cancelled`, saying the runtime was
        closed; calls running get a cancel's grace to end with their own result.
        `cancel=False` leaves them to the cluster instead: a process that
        submits for others (the HTTP gateway) stops without ending their
        batches. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        if cancel:
            from runtime.batch.progress import CANCEL_GRACE
            from runtime.batch.view import CLOSED_BY

            seconds = CANCEL_GRACE + CLOSE_AFTER_GRACE
            self._follower.cancel_all(by=CLOSED_BY, seconds=seconds)
        self._follower.close()
        self._offload.shutdown(wait=False, cancel_futures=True)
        self._transport.close()
        self.ledger.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
