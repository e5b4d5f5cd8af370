"""The gateway's Prometheus metrics, served at `/metrics` behind a key
(docs/architecture.md, "The HTTP gateway"), and the ASGI middleware that counts
requests by route template (a batch id in a label would grow without bound)."""

from __future__ import annotations

from celery import Celery
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from runtime.transport import broker
from runtime.transport.names import QUEUES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self, app: Celery | None = None) -> None:
        """`app`: the deployment's Celery app, whose queues are measured at each
        scrape (calls waiting and running per queue: what an autoscaler needs)."""
        self.registry = CollectorRegistry()
        if app is not None:
            self.registry.register(QueueLoad(app))
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


class QueueLoad(Collector):
    """Calls waiting in each queue and running from it, read at each scrape
    from the broker and the workers (docs/architecture.md, "Autoscaling")."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def collect(self):
        waiting = GaugeMetricFamily(
            "toolrun_calls_waiting", "Calls waiting in the queue", labels=["queue"]
        )
        running = GaugeMetricFamily(
            "toolrun_calls_running", "Calls the workers of the queue run", labels=["queue"]
        )
        for queue, (ready, active) in (broker.load(self.app, QUEUES) or {}).items():
            waiting.add_metric([queue], ready)
            running.add_metric([queue], active)
        yield waiting
        yield running

    def describe(self):
        return []  # measured at each scrape, not at registration


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
