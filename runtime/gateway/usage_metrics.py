"""Usage as Prometheus counters on the gateway's `/metrics`
(docs/architecture.md, "Usage and budgets"): calls, worker-seconds and money
by tool, key (the submitter) and status, summed in the ledger at each scrape;
and what each submitter has used and has left of each budget in its window
now, from Redis."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runtime.errors import LedgerUnavailable, StateUnavailable
from runtime.flow.budget_reading import read_budgets
from runtime.flow.budgets import Budget, source_tag
from runtime.ledger.store import Ledger

log = logging.getLogger("toolrun.metrics")
LABELS = ["tool", "key", "status"]


class Usage(Collector):
    def __init__(
        self,
        ledger: Ledger,
        counters: Callable[[], dict[str, float] | None] | None = None,
        files: tuple[dict, ...] = (),
    ) -> None:
        """`counters`: reads the budgets' counters Redis holds (None: none are);
        `files`: the org and user settings read at startup (their budgets)."""
        self.ledger, self.counters = ledger, counters
        self.budgets: dict[tuple[str, str], Budget] = {
            (source_tag(b.source), b.name): b
            for data in files
            for b in read_budgets(data, data.get("_source", "settings"))
        }

    def collect(self) -> Iterator[Metric]:
        yield from self._budgets()
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

    def _budgets(self) -> Iterator[Metric]:
        if not self.budgets or self.counters is None:
            return
        try:
            counters = self.counters()
        except StateUnavailable as error:
            log.warning("metrics: budgets: %s", error)
            return
        if counters is None:
            return
        labels = ["budget", "key", "window", "measure"]
        used = GaugeMetricFamily(
            "toolrun_budget_used", "Used of a budget in its window now", labels=labels
        )
        left = GaugeMetricFamily(
            "toolrun_budget_remaining", "Left of a budget in its window now", labels=labels
        )
        for counter, amount in sorted(counters.items()):
            tag, name, *scope, window = counter.split(":")
            budget = self.budgets.get((tag, name))
            if budget is None or window != budget.window_of(datetime.now(UTC))[0]:
                continue  # a project file's budget, or a window gone by
            values = [name, ":".join(scope), window, budget.measure]
            used.add_metric(values, amount)
            left.add_metric(values, max(0.0, budget.limit - amount))
        yield used
        yield left
