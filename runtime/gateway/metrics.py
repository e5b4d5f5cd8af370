"""The gateway's Prometheus metrics, served at `/metrics` behind a key
(docs/architecture.md, "The HTTP gateway"), and the ASGI middleware that counts
requests by route template (a batch id in a label would grow without bound)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "toolrun_gateway_requests",
            "HTTP requests answered",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.batches = Counter(
            "toolrun_gateway_batches_submitted", "Batches submitted", registry=self.registry
        )
        self.streams = Gauge(
            "toolrun_gateway_event_streams", "Event streams open", registry=self.registry
        )
        self.events = Counter(
            "toolrun_gateway_events_sent", "Server-Sent Events sent", registry=self.registry
        )

    def text(self) -> bytes:
        return generate_latest(self.registry)


class CountRequests:
    """Pure ASGI, so an event stream is counted once, when its response starts."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def counted(message) -> None:
            if message["type"] == "http.response.start":
                route = getattr(scope.get("route"), "path", "unmatched")
                self.metrics.requests.labels(scope["method"], route, message["status"]).inc()
            await send(message)

        await self.app(scope, receive, counted)
