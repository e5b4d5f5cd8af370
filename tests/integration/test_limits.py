"""Rate limits, concurrency caps, size caps and fair share on real Redis and
real worker processes (docs/architecture.md, "Flow control"). Every test
counts under a submitter of its own, so no other test's calls meet its
windows or slots."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from runtime import adapters
from runtime.errors import BatchTooLarge
from runtime.types import Status
from tests.conftest import runtime_on
from tests.support.tools import marks


def naps(count: int, seconds: float = 0.0, prefix: str = "n") -> list[dict]:
    return [
        {"id": f"{prefix}{i}", "name": "nap", "arguments": {"label": prefix, "seconds": seconds}}
        for i in range(count)
    ]


@pytest.fixture
def limited(stack, user_settings, tmp_path):
    """A client under an org policy of `limits` (given per test), and a
    submitter no other test uses."""
    made = []

    def make(limits: dict):
        policy = tmp_path / f"org-{len(made)}.json"
        policy.write_text(json.dumps({"limits": limits}))
        rt = runtime_on(stack, user_settings, policy_file=policy)
        made.append(rt)
        return rt, f"tester-{uuid.uuid4().hex[:8]}", policy

    yield make
    for rt in made:
        rt.close()


def most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max(sum(1 for t in times[i:] if t < start + window) for i, start in enumerate(times))


def test_refuse_ends_the_call_with_its_status_and_when_to_retry(limited, workspace):
    rate = {"name": "few", "per": "key", "limit": "2/minute", "on_limit": "refuse"}
    rt, who, policy = limited({"rate": [rate]})
    handle = rt.submit(naps(4), mode="auto", workspace=workspace, submitter=who)
    results = handle.results(timeout=60)
    assert [r.status for r in results].count(Status.ok) == 2
    refused = [r for r in results if r.status is Status.rate_limited]
    assert len(refused) == 2
    for result in refused:
        assert 0 < result.content["retry_after_s"] <= 60
        assert f"rate 'few' (2/minute per key, from {policy})" in result.model_message
        assert "Try again in" in result.model_message
        rows = [e for e in rt.ledger.events(handle.batch_id, result.call_id) if e.rule]
        assert (rows[-1].rule, rows[-1].source) == ("rate:few", str(policy))  # after admission's
    (block,) = adapters.reply("anthropic", refused[:1])["content"]
    assert block["is_error"] is True and "rate limited" in json.dumps(block)
    (chat,) = adapters.reply("openai", refused[:1])
    assert "retry_after_s" in chat["content"] or "Try again" in chat["content"]


def test_delayed_calls_run_later_and_end_ok(limited, workspace):
    rate = {"name": "paced", "per": "key", "limit": "2/second"}
    rt, who, _ = limited({"rate": [rate]})
    handle = rt.submit(naps(6), mode="auto", workspace=workspace, submitter=who)
    results = handle.results(timeout=120)
    assert all(r.ok for r in results), [r.model_message for r in results]
    starts = [m["start"] for m in marks(workspace, "intervals")]
    assert len(starts) == 6
    assert most_in_any_window(starts, 1.0) <= 2
    assert max(starts) - min(starts) >= 2.0  # six calls at two a second


def test_a_concurrency_cap_of_two_holds_under_twenty_parallel_calls(limited, workspace):
    cap = {"name": "pair", "per": "key", "tools": ["nap"], "max": 2}
    rt, who, _ = limited({"concurrency": [cap]})
    handle = rt.submit(naps(20, seconds=0.2), mode="auto", workspace=workspace, submitter=who)
    results = handle.results(timeout=180)
    assert all(r.ok for r in results), [r.model_message for r in results]
    spans = [(m["start"], m["end"]) for m in marks(workspace, "intervals")]
    assert len(spans) == 20
    most = max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)
    assert most <= 2


def test_a_concurrency_cap_refuses_with_its_status(limited, workspace):
    cap = {"name": "one", "per": "key", "tools": ["nap"], "max": 1, "on_limit": "refuse"}
    rt, who, policy = limited({"concurrency": [cap]})
    handle = rt.submit(naps(3, seconds=0.5), mode="auto", workspace=workspace, submitter=who)
    results = handle.results(timeout=60)
    statuses = [r.status for r in results]
    assert statuses.count(Status.ok) >= 1
    assert Status.concurrency_limited in statuses
    refused = next(r for r in results if r.status is Status.concurrency_limited)
    assert "retry_after_s" in refused.content
    assert f"concurrency cap 'one' (1 at once per key, from {policy})" in refused.model_message


def test_a_batch_over_the_size_cap_is_refused_before_anything_is_written(limited, workspace):
    rt, who, _ = limited({"size": {"calls_per_batch": 5}})
    with pytest.raises(BatchTooLarge, match="6 calls and the policy allows 5 per batch"):
        rt.submit(naps(6), mode="auto", workspace=workspace, submitter=who, key=who)
    assert rt.ledger.batch(rt_key_id(who)) is None
    assert rt.submit(naps(5), mode="auto", workspace=workspace, submitter=who).results(timeout=60)


def rt_key_id(key: str) -> str:
    from runtime.client.runtime import keyed_id

    return keyed_id(key)


def test_fair_share_another_keys_call_ends_while_a_flood_is_still_queued(limited, workspace):
    rt, flooder, _ = limited({"fair_share": {"in_flight_per_key": 4}})
    other = f"other-{uuid.uuid4().hex[:8]}"
    flood = rt.submit(naps(300, 0.02, "a"), mode="auto", workspace=workspace, submitter=flooder)
    time.sleep(0.5)
    mine = rt.submit(naps(1, 0.0, "b"), mode="auto", workspace=workspace, submitter=other)
    (result,) = mine.results(timeout=120)
    assert result.ok
    assert not flood.done  # B's call did not wait for A's flood to drain
    assert all(r.ok for r in flood.results(timeout=300))
