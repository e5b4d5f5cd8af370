"""The gateway's Prometheus metrics, served at `/metrics` behind a key
(docs/architecture.md, "The HTTP gateway"), and the ASGI middleware that counts
requests by route template (a batch id in a label would grow without bound).

`Cluster` adds the figures of the whole cluster that operators and autoscalers
read, computed at each scrape (docs/architecture.md, "Traces and metrics");
`toolrun metrics` serves the same without a gateway."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from celery import Celery
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from runtime.errors import LedgerUnavailable, StateUnavailable
from runtime.gateway import usage_metrics
from runtime.gateway.keys import Key, Role
from runtime.gateway.limit_metrics import LimitGauges
from runtime.gateway.metric_views import Shown
from runtime.keyspace.names import QUEUES
from runtime.ledger.approvals import Approvals
from runtime.transport import broker
from runtime.transport.tallies import Tallies

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
log = logging.getLogger("toolrun.metrics")


class Cluster(Collector):
    """Calls ended by tool and status, their run times, calls waiting and
    running per queue (from Redis), approvals pending (from the ledger). A
    store that cannot be read leaves its figures out of that scrape and says
    so in `toolrun_cluster_up`."""

    def __init__(self, tallies: Tallies, approvals: Approvals, app: Celery | None = None) -> None:
        """`app`: the deployment's Celery app, whose broker (Redis or RabbitMQ,
        apart from the state's Redis or not) counts the calls waiting."""
        self.tallies, self.approvals, self.app = tallies, approvals, app

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "toolrun_cluster_up", "Whether the store could be read", labels=["store"]
        )
        try:
            figures = self.tallies.read()
        except StateUnavailable as error:
            log.warning("metrics: %s", error)
            up.add_metric(["redis"], 0)
        else:
            up.add_metric(["redis"], 1)
            if self.app is not None:
                try:
                    figures.waiting = broker.waiting(self.app, QUEUES)
                except Exception as error:  # noqa: BLE001 - the broker away: the state's lists
                    log.warning("metrics: the broker's queues: %s", error)
            yield from _cluster(figures)
        try:
            pending = len(self.approvals.pending())
        except LedgerUnavailable as error:
            log.warning("metrics: %s", error)
            up.add_metric(["ledger"], 0)
        else:
            up.add_metric(["ledger"], 1)
            yield GaugeMetricFamily(
                "toolrun_approvals_pending", "Calls waiting for a person's answer", value=pending
            )
        yield up


def _cluster(figures) -> Iterator[Metric]:
    calls = CounterMetricFamily(
        "toolrun_calls", "Calls ended, by tool and status", labels=["tool", "status"]
    )
    for (tool, status), count in sorted(figures.calls.items()):
        calls.add_metric([tool, status], count)
    yield calls
    seconds = HistogramMetricFamily(
        "toolrun_call_seconds", "Run time of the calls that ran, by tool", labels=["tool"]
    )
    for tool, times in sorted(figures.run_times.items()):
        seconds.add_metric([tool], times.cumulative(), sum_value=times.total)
    yield seconds
    for name, text, values in (
        ("toolrun_calls_waiting", "Calls in the broker's queue, not yet taken", figures.waiting),
        ("toolrun_calls_running", "Calls running now (live leases)", figures.running),
    ):
        gauge = GaugeMetricFamily(name, text, labels=["queue"])
        for queue, count in values.items():
            gauge.add_metric([queue], count)
        yield gauge


def cluster_registry(runtime) -> CollectorRegistry:
    """A registry holding only the cluster's figures (`toolrun metrics`),
    unknown tools' names folded into one label value."""
    figures = CollectorRegistry()
    deployment = runtime.deployment
    figures.register(Cluster(Tallies(deployment.client), deployment.approvals, app=deployment.app))
    figures.register(_usage(runtime))
    registry = CollectorRegistry()
    registry.register(Shown(figures, _tools(runtime)))
    return registry


def _tools(runtime) -> Callable[[], set[str]]:
    """The registry's tool names, the label values `Shown` keeps as they are."""
    return lambda: set(runtime.registry.names()) if runtime is not None else set()


def _usage(runtime) -> usage_metrics.Usage:
    files = (runtime.policies.org, runtime.policies.user)
    return usage_metrics.Usage(runtime.ledger, runtime.deployment.budgets_used, files)


class Metrics:
    def __init__(self, runtime=None) -> None:
        """`runtime`: the gateway's; on Celery and Redis, the cluster's figures
        too (calls waiting and running per queue: what an autoscaler needs)."""
        self.registry = CollectorRegistry()
        self.tools = _tools(runtime)
        deployment = runtime.deployment if runtime is not None else None
        if deployment is not None and deployment.client is not None:
            self.registry.register(
                Cluster(Tallies(deployment.client), deployment.approvals, app=deployment.app)
            )
        if runtime is not None and deployment is not None:
            self.registry.register(_usage(runtime))
            self.registry.register(LimitGauges(runtime.policies.limits, deployment.throttle))
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

    def text(self, key: Key | None = None) -> bytes:
        """Every series for an admin or `metrics` key (or no key: the process
        itself); any other key's own and the aggregates ("The HTTP gateway")."""
        everything = key is None or key.role in (Role.admin, Role.metrics)
        return generate_latest(
            Shown(self.registry, self.tools, None if everything else key.principal)
        )


class CountRequests:
    """Pure ASGI, so an event stream is counted once, when its response starts.

    It also writes the access line of a request answered 4xx or 5xx, in
    uvicorn's words, when uvicorn's own access log is off (it is, but at
    DEBUG): uvicorn builds a record for every answered request before any
    filter can drop it (docs/architecture.md, "The HTTP gateway")."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def counted(message) -> None:
            if message["type"] == "http.response.start":
                route = getattr(scope.get("route"), "path", "unmatched")
                status = message["status"]
                self.metrics.requests.labels(scope["method"], route, status).inc()
                if status >= 400 and not access_log.isEnabledFor(logging.DEBUG):  # else uvicorn's
                    _refused(scope, status)
            await send(message)

        await self.app(scope, receive, counted)


# uvicorn's own access logger goes quiet (propagates nothing) when its log is off.
access_log = logging.getLogger("toolrun.gateway.access")


def _refused(scope, status: int) -> None:
    """uvicorn's access line of a refused request: who asked what, and the answer."""
    client = scope.get("client")
    who = f"{client[0]}:{client[1]}" if client else "-"
    path = scope.get("path", "")
    if query := scope.get("query_string", b"").decode("latin-1"):
        path = f"{path}?{query}"
    version = scope.get("http_version", "1.1")
    access_log.info('%s - "%s %s HTTP/%s" %d', who, scope["method"], path, version, status)
