"""OpenTelemetry traces of batches and calls (docs/architecture.md, "Traces and metrics").

toolrun depends on the OpenTelemetry API only, which records nothing until a
tracer provider is set. A process sets one in two ways: the application did
(its own SDK set-up: toolrun's spans join it), or `configure` did, from the
standard `OTEL_*` variables, when the `otel` extra is installed and an OTLP
endpoint or exporter is named. With neither, every function here returns
before touching the API, so tracing off costs a check of one flag.

The caller's context crosses processes as a W3C `traceparent` in the signed
task message (`CallMessage.traceparent`); a worker's `execute_tool {tool}` span
is its child, following the GenAI semantic conventions. A call that no worker
ran to its end (refused by the gate, denied by a person, skipped, cancelled,
past its deadline, held at a limit, its worker lost) gets a span of the same
name from the process that ended it (`ended_span`), so a trace shows every
call of the batch. Attributes come only from what the gate decided and what
`results` redacted; a call's arguments only with `TOOLRUN_TRACE_ARGUMENTS`,
redacted.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from runtime.types import CallMessage, Status, ToolResult

log = logging.getLogger("toolrun.tracing")
SCOPE = "toolrun"
PROPAGATOR = TraceContextTextMapPropagator()
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
ARGUMENTS_CHARS = 4096  # what a span keeps of a call's arguments, when they are opted in
# Any of these names an exporter; without one, `configure` sets nothing up.
EXPORTER_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)
_configured: dict[int, bool] = {}  # pid -> whether this process set a provider up
# The API loads a provider named by this variable on first use; then `enabled` asks it.
_PROVIDER_FROM_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


class Redacts(Protocol):
    def redact(self, value: Any) -> Any: ...


def configure() -> bool:
    """Set this process's tracer provider up from the `OTEL_*` variables, once
    per process (a forked pool process sets up its own): an OTLP/HTTP exporter
    behind a batch processor. Nothing when the application set a provider of
    its own, `OTEL_SDK_DISABLED` is true, no exporter is named, or the `otel`
    extra is missing. True if spans will be recorded."""
    pid = os.getpid()
    if pid in _configured:
        return enabled()
    _configured[pid] = False
    if enabled():  # the application's own provider: its spans and ours share it
        return True
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if not any(os.environ.get(name) for name in EXPORTER_VARIABLES):
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_* names an exporter but the `otel` extra is not installed: no traces")
        return False
    provider = TracerProvider(resource=Resource.create())  # OTEL_SERVICE_NAME, ..._ATTRIBUTES
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured[pid] = True
    return True


def enabled() -> bool:
    """Whether a tracer provider records spans in this process. Until one is
    set, the answer costs one attribute read: the API's own getter looks its
    variable up in `os.environ` each time (microseconds, on every call)."""
    if getattr(trace, "_TRACER_PROVIDER", True) is None and not _PROVIDER_FROM_ENVIRONMENT:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)


def traceparent(explicit: str | None = None) -> str | None:
    """The context a batch is submitted under, as a `traceparent`: `explicit`
    (from `submit(traceparent=...)` or an HTTP header) if it is well formed,
    else the caller's current span, else None."""
    if explicit is not None:
        explicit = explicit.strip().lower()
        return explicit if TRACEPARENT.match(explicit) and explicit[:2] != "ff" else None
    if not enabled():
        return None
    carrier: dict[str, str] = {}
    PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


@contextmanager
def batch_span(batch_id: str, calls: int, mode: str, parent: str | None) -> Iterator[str | None]:
    """The batch's span on the side that submits it, around recording and
    sending it; yields the `traceparent` its messages carry (this span's, or
    `parent` untouched when this process records no spans)."""
    if not enabled():
        yield parent
        return
    context = PROPAGATOR.extract({"traceparent": parent}) if parent else None
    attributes = {"toolrun.batch.id": batch_id, "toolrun.batch.calls": calls, "toolrun.mode": mode}
    tracer = trace.get_tracer(SCOPE)
    with tracer.start_as_current_span(
        "toolrun batch", context=context, kind=SpanKind.PRODUCER, attributes=attributes
    ):
        carrier: dict[str, str] = {}
        PROPAGATOR.inject(carrier)
        yield carrier.get("traceparent")


class CallSpan:
    """What a worker's `execute_tool` span learns once the call has ended."""

    def __init__(self, span: trace.Span | None) -> None:
        self.span = span

    def ended(self, result: ToolResult) -> None:
        span = self.span
        if span is None:
            return
        span.set_attribute("toolrun.call.status", result.status.value)
        span.set_attribute("toolrun.call.attempts", result.attempts)
        span.set_attribute("toolrun.call.duration_ms", result.duration_ms)
        if result.status is not Status.ok:
            span.set_attribute("error.type", result.status.value)
            span.set_status(StatusCode.ERROR, result.status.value)


@contextmanager
def call_span(
    message: CallMessage, *, worker: str | None, redactor: Redacts, arguments: bool
) -> Iterator[CallSpan]:
    """`execute_tool {tool}` around one delivery of a call on a worker, the
    child of the context its message carries; the gate's decision and the
    approval are its events (`arguments`: record the redacted arguments)."""
    if not enabled():
        yield CallSpan(None)
        return
    parent = message.traceparent
    context = PROPAGATOR.extract({"traceparent": parent}) if parent else None
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": message.tool,
        "gen_ai.tool.call.id": message.call_id,
        "gen_ai.tool.type": "function",
        "toolrun.batch.id": message.batch_id,
        "toolrun.mode": message.mode.value,
    }
    if worker:
        attributes["toolrun.worker"] = worker
    if arguments:
        shown = json.dumps(redactor.redact(message.arguments), default=str)
        attributes["gen_ai.tool.call.arguments"] = shown[:ARGUMENTS_CHARS]
    tracer = trace.get_tracer(SCOPE)
    with tracer.start_as_current_span(
        f"execute_tool {message.tool}",
        context=context,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,  # an exception's text is not redacted
        set_status_on_exception=False,
    ) as span:
        decision = {k: str(redactor.redact(v)) for k, v in message.decision.items()}
        span.add_event(
            "toolrun.decision", {f"toolrun.decision.{k}": v for k, v in decision.items()}
        )
        if message.approved_by:
            span.add_event(
                "toolrun.approval",
                {"toolrun.approval.by": str(redactor.redact(message.approved_by))},
            )
        yield CallSpan(span)


@contextmanager
def hook_span(name: str, when: str, kind: str, tool: str) -> Iterator[dict[str, Any]]:
    """`policy_hook {name}` around one policy hook's consultation, a child of
    the batch's span (pre hooks, on the submitter) or the call's (post hooks, on
    the worker); what the caller puts in the yielded dict (the answer, the
    failure, the latency) becomes the span's attributes as it ends."""
    found: dict[str, Any] = {}
    if not enabled():
        yield found
        return
    attributes = {
        "toolrun.hook.name": name,
        "toolrun.hook.when": when,
        "toolrun.hook.kind": kind,
        "gen_ai.tool.name": tool,
    }
    tracer = trace.get_tracer(SCOPE)
    with tracer.start_as_current_span(f"policy_hook {name}", attributes=attributes) as span:
        yield found
        for field, value in found.items():
            span.set_attribute(f"toolrun.hook.{field}", value)
        if "failure" in found:
            span.set_status(StatusCode.ERROR, str(found["failure"]))


def ended_span(
    traceparent: str | None,
    batch_id: str,
    tool: str,
    result: ToolResult,
    decision: dict[str, Any],
    *,
    redactor: Redacts,
    started: bool = False,
) -> None:
    """A zero-length `execute_tool {tool}` span for a call ended outside a
    worker's run of it, the child of the batch's span (`traceparent`): its
    status, why (the result's redacted summary) and the decision behind it as
    attributes; `started`: a worker had claimed it (lost, or abandoned at the
    deadline), so its own span may be missing."""
    if not enabled():
        return
    context = PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": result.call_id,
        "gen_ai.tool.type": "function",
        "toolrun.batch.id": batch_id,
        "toolrun.call.status": result.status.value,
        "toolrun.call.ran": False,
        "toolrun.call.started": started,
        "toolrun.call.summary": str(redactor.redact(result.summary)),
    }
    for name, value in decision.items():
        if value not in (None, ""):
            attributes[f"toolrun.decision.{name}"] = str(redactor.redact(value))
    span = trace.get_tracer(SCOPE).start_span(
        f"execute_tool {tool}", context=context, kind=SpanKind.INTERNAL, attributes=attributes
    )
    if result.status is not Status.ok:
        span.set_attribute("error.type", result.status.value)
        span.set_status(StatusCode.ERROR, result.status.value)
    span.end()
