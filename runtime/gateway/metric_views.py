"""What a scrape of `/metrics` shows (docs/architecture.md, "The HTTP
gateway"): label values bounded, and per-key series only to the keys that may
see them.

A call's tool is the name the model gave, so a model (or a key) that makes
up names would add a series per name: every `tool` label that names no tool
of the registry is shown as one value, `(unknown)`, its samples summed.
Series labelled by a key (`key`, or a limit's `scope`) are every key's for
an admin or a `metrics` key; any other key is shown its own (its `key:NAME`,
and a limit's `key:NAME|tool`) and the cluster's aggregates (calls by tool
and status, queues, requests by route), never another key's, nor a host or
tool scope that would say what others fetch."""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from runtime.transport.tallies import UNKNOWN_TOOL

KEYED = ("key", "scope")  # labels whose value names a submitter (or a limit's scope)


class Shown(Collector):
    """`source`'s metrics with unknown tools folded into one value and, with
    `principal` (`key:NAME`), only the series of that key among the keyed ones."""

    def __init__(
        self, source: Collector, tools: Callable[[], Collection[str]], principal: str | None = None
    ) -> None:
        """`tools`: the registry's names, asked at each scrape."""
        self.source, self.tools, self.principal = source, tools, principal

    def collect(self) -> Iterator[Metric]:
        known = self.tools()
        for metric in self.source.collect():
            shown = copy.copy(metric)
            seen = (
                sample
                for sample in metric.samples
                if self.principal is None or _owned(sample.labels, self.principal)
            )
            shown.samples = _folded(_bounded(seen, known))
            yield shown


def _owned(labels: dict[str, str], principal: str) -> bool:
    return all(
        labels[name] == principal or labels[name].startswith(f"{principal}|")
        for name in KEYED
        if name in labels
    )


def _bounded(samples, known: Collection[str]):
    for sample in samples:
        tool = sample.labels.get("tool")
        if tool is not None and tool not in known:
            sample = sample._replace(labels={**sample.labels, "tool": UNKNOWN_TOOL})
        yield sample


def _folded(samples) -> list:
    """Samples of one name and labels summed into one, in their first order."""
    found: dict[tuple, object] = {}
    for sample in samples:
        at = (sample.name, tuple(sorted(sample.labels.items())))
        before = found.get(at)
        found[at] = sample if before is None else before._replace(value=before.value + sample.value)
    return list(found.values())
