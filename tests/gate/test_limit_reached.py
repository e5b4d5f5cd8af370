"""What a rate or concurrency cap that a call may not pass now tells the
model and the ledger (runtime/gate/limit_reached.py)."""

from __future__ import annotations

from runtime.flow.limits import Concurrency, Rate
from runtime.gate.limit_reached import Reached
from runtime.types import Status


def test_what_a_limit_that_fired_tells_the_model_and_the_ledger():
    rate = Rate(name="fetch", per="host", limit="5/second", source="/etc/org.json")
    reached = Reached(rate, f"{rate.tag}:host:example.com", at=110.5)
    result = reached.result("c1", "http_get", now=110.0)
    assert result.status is Status.rate_limited
    assert result.content["retry_after_s"] == 0.5 and result.content["scope"] == "example.com"
    assert "rate 'fetch' (5/second per host, from /etc/org.json)" in result.model_message
    assert "Try again in 0.5 s" in result.model_message
    decision = reached.decision(now=110.0)
    assert (decision.rule, decision.source) == ("rate:fetch", "/etc/org.json")
    cap = Concurrency(name="two", per="key", max=2, source="org")
    capped = Reached(cap, f"{cap.tag}:key:key:ci", at=100.0).result("c2", "nap", now=101.0)
    assert capped.status is Status.concurrency_limited and capped.content["scope"] == "key:ci"
    assert capped.content["retry_after_s"] == 0


def test_a_rate_never_asks_for_a_wait_past_its_window():
    """`now` may be read a moment before Redis counted the window's entry."""
    rate = Rate(name="few", per="key", limit="2/minute", source="org")
    reached = Reached(rate, f"{rate.tag}:key:ci", at=160.008)
    assert reached.result("c1", "nap", now=100.0).content["retry_after_s"] == 60
