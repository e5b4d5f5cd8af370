"""Usage as Prometheus counters on the gateway's `/metrics`
(docs/architecture.md, "Usage and budgets"): calls, worker-seconds and money
by tool, key (the submitter) and status, summed in the ledger at each scrape."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from runtime.errors import LedgerUnavailable
from runtime.ledger.store import Ledger

log = logging.getLogger("toolrun.metrics")
LABELS = ["tool", "key", "status"]


class Usage(Collector):
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def collect(self) -> Iterator[Metric]:
        try:
            rows = self.ledger.usage_totals()
        except LedgerUnavailable as error:  # `toolrun_cluster_up` says the ledger is away
            log.warning("metrics: usage: %s", error)
            return
        families = {
            "calls": CounterMetricFamily(
                "toolrun_usage_calls", "Calls ended, by tool, key and status", labels=LABELS
            ),
            "worker_seconds": CounterMetricFamily(
                "toolrun_usage_worker_seconds",
                "Wall time on the workers of the calls that ran",
                labels=LABELS,
            ),
            "cost": CounterMetricFamily(
                "toolrun_usage_spend", "Money by the policy's price table", labels=LABELS
            ),
        }
        for row in rows:
            labels = [row["tool"], row["key"], row["status"]]
            for name, family in families.items():
                family.add_metric(labels, row[name])
        yield from families.values()
