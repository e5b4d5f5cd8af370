"""Each limit's remaining capacity as gauges, read from the session stack's
real Redis at each scrape."""

from __future__ import annotations

import uuid

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from runtime.flow.limits import Concurrency, FairShare, Limits, Rate
from runtime.gateway.limit_metrics import LimitGauges
from runtime.transport.redis_state import RedisState


@pytest.fixture
def state(stack):
    found = RedisState(redis.Redis.from_url(stack.redis_url))
    yield found
    found.close()


def test_rates_slots_and_shares_show_what_is_left(state):
    tag = uuid.uuid4().hex[:8]
    rate = Rate(name=f"r{tag}", per="key", limit="10/minute", source=tag)
    cap = Concurrency(name=f"c{tag}", per="key", max=3, source=tag)
    limits = Limits(rates=(rate,), caps=(cap,), fair_share=FairShare(), principal=f"k{tag}")
    (_, window), (_, slot) = limits.windows("nap", {})[0], limits.slots("nap")[0]
    assert state.throttle.hit([(rate.item, window)] * 4) is None
    assert state.throttle.take([(slot, 3)], "b c1", 30) is None
    state.throttle.admit_reads(f"k{tag}", 1, "b", [("c1", "{}"), ("c2", '{"member": "b c2"}')])
    registry = CollectorRegistry()
    registry.register(LimitGauges(limits, state.throttle))
    text = generate_latest(registry).decode()
    assert f'toolrun_limit_rate_remaining{{limit="r{tag}",scope="k{tag}"}} 6.0' in text
    assert f'toolrun_limit_slots_remaining{{limit="c{tag}",scope="k{tag}"}} 2.0' in text
    assert f'toolrun_limit_slots_used{{limit="c{tag}",scope="k{tag}"}} 1.0' in text
    assert f'toolrun_fair_share_parked{{key="k{tag}"}} 1.0' in text
    assert f'toolrun_fair_share_in_flight{{key="k{tag}"}} 1.0' in text


def test_without_limits_there_are_no_gauges(state):
    registry = CollectorRegistry()
    registry.register(LimitGauges(Limits(), state.throttle))
    assert "toolrun_limit" not in generate_latest(registry).decode()
