"""What a scrape shows (runtime/gateway/metric_views.py): unknown tools folded
into one label value, and only a key's own series among the keyed ones."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from runtime.gateway.metric_views import Shown


class Figures:
    def collect(self):
        calls = CounterMetricFamily("calls", "by tool and key", labels=["tool", "key", "status"])
        for tool, key, count in [
            ("read_file", "key:ann", 1),
            ("made-up-1", "key:ann", 2),
            ("made-up-2", "key:ann", 3),
            ("read_file", "key:ben", 4),
        ]:
            calls.add_metric([tool, key, "ok"], count)
        yield calls
        left = GaugeMetricFamily("left", "by limit and scope", labels=["limit", "scope"])
        for scope in ("key:ann", "key:ann|shell", "key:ben", "example.com"):
            left.add_metric(["r", scope], 1)
        yield left
        yield GaugeMetricFamily("waiting", "no key", value=7)


def _text(principal: str | None) -> str:
    registry = CollectorRegistry()
    registry.register(Shown(Figures(), lambda: {"read_file"}, principal))
    return generate_latest(registry).decode()


def test_unknown_tools_are_one_label_value_summed():
    text = _text(None)
    assert 'calls_total{key="key:ann",status="ok",tool="(unknown)"} 5.0' in text
    assert "made-up" not in text
    assert 'calls_total{key="key:ben",status="ok",tool="read_file"} 4.0' in text


def test_a_key_sees_its_own_keyed_series_and_the_aggregates_only():
    text = _text("key:ann")
    assert 'key="key:ann"' in text and 'scope="key:ann|shell"' in text
    assert "key:ben" not in text and "example.com" not in text
    assert "waiting 7.0" in text
