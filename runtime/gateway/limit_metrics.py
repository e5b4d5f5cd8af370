"""Each limit's remaining capacity as Prometheus gauges on the gateway's
`/metrics` (docs/architecture.md, "Flow control"), read from Redis at each
scrape: what each rate's window has left per scope, the slots each
concurrency cap has free per scope, and each submitter's reads in flight and
parked by fair share. Only the org and user files' limits are known here (a
project file's are per batch)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import limits as ratelimits
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runtime.errors import StateUnavailable
from runtime.flow.limits import Limits
from runtime.flow.throttle import Throttle

log = logging.getLogger("toolrun.metrics")
LABELS = ["limit", "scope"]


class LimitGauges(Collector):
    def __init__(self, limits: Limits, throttle: Throttle | None = None) -> None:
        """`throttle`: the cluster's, which holds the windows, slots and shares."""
        self.limits, self.throttle = limits, throttle

    def collect(self) -> Iterator[Metric]:
        if self.throttle is None or not self.limits:
            return
        try:
            yield from self._rates()
            yield from self._slots()
            yield from self._shares()
        except StateUnavailable as error:
            log.warning("metrics: limits: %s", error)

    def _rates(self) -> Iterator[Metric]:
        left = GaugeMetricFamily(
            "toolrun_limit_rate_remaining", "Calls a rate's window allows now", labels=LABELS
        )
        for rate in self.limits.rates:
            for scope in self.throttle.windows_open(f"{rate.tag}:"):
                remaining, _ = self.throttle.left(ratelimits.parse(rate.limit), scope)
                left.add_metric([rate.name, scope.split(":", 3)[-1]], remaining)
        yield left

    def _slots(self) -> Iterator[Metric]:
        used = GaugeMetricFamily(
            "toolrun_limit_slots_used", "Calls holding a concurrency cap's slot", labels=LABELS
        )
        free = GaugeMetricFamily(
            "toolrun_limit_slots_remaining", "Free slots of a concurrency cap", labels=LABELS
        )
        held = self.throttle.slots_used() if self.limits.caps else {}
        for cap in self.limits.caps:
            for scope, count in sorted(held.items()):
                if scope.startswith(f"{cap.tag}:"):
                    labels = [cap.name, scope.split(":", 3)[-1]]
                    used.add_metric(labels, count)
                    free.add_metric(labels, max(0, cap.max - count))
        yield used
        yield free

    def _shares(self) -> Iterator[Metric]:
        if self.limits.fair_share is None:
            return
        going = GaugeMetricFamily(
            "toolrun_fair_share_in_flight", "A key's reads queued or running", labels=["key"]
        )
        parked = GaugeMetricFamily(
            "toolrun_fair_share_parked", "A key's reads waiting their turn", labels=["key"]
        )
        for who, (flying, waiting) in sorted(self.throttle.shares().items()):
            going.add_metric([who], flying)
            parked.add_metric([who], waiting)
        yield going
        yield parked
