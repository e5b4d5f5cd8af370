"""A real OTLP/HTTP trace receiver for tests and the bench: a tiny HTTP server
on loopback that takes protobuf posts to `/v1/traces` (what the SDK's
OTLP/HTTP exporter sends) and keeps each span, decoded with opentelemetry-proto."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict
    events: dict  # event name -> its attributes
    error: bool


@dataclass
class Receiver:
    spans: list[Span] = field(default_factory=list)
    posts: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        found = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        Span(
                            service=resource.get("service.name", ""),
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            events={e.name: _attributes(e.attributes) for e in span.events},
                            error=span.status.code == 2,  # STATUS_CODE_ERROR
                        )
                    )
        with self.changed:
            self.spans.extend(found)
            self.posts += 1
            self.changed.notify_all()

    def wait_for(self, done, timeout: float) -> list[Span]:
        """The spans once `done(spans)` holds; AssertionError after `timeout` seconds."""
        limit = time.monotonic() + timeout
        with self.changed:
            while not done(self.spans):
                left = limit - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"spans received: {[s.name for s in self.spans]}")
                self.changed.wait(left)
            return list(self.spans)


def _attributes(pairs) -> dict:
    found = {}
    for pair in pairs:
        kind = pair.value.WhichOneof("value")
        found[pair.key] = getattr(pair.value, kind) if kind else None
    return found


def serve() -> tuple[ThreadingHTTPServer, Receiver]:
    """A receiver listening on a free loopback port (`server.server_port`);
    `server.shutdown()` stops it."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            receiver.take(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True).start()
    return server, receiver


def environment(server: ThreadingHTTPServer, service: str) -> dict[str, str]:
    """The `OTEL_*` variables of a process that exports to `server`, quickly."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds between exports (default 5 s)
    }
