"""Rate limits, concurrency caps, size caps and fair share on real Redis and
real worker processes (docs/architecture.md, "Flow control"). Every test
counts under a submitter of its own, so no other test's calls meet its
windows or slots."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
import redis

from runtime import adapters
from runtime.errors import BatchTooLarge, TooManyOpenBatches
from runtime.keyspace.names import slots_key
from runtime.types import Status
from tests.conftest import runtime_on
from tests.support import submitter
from tests.support.faults import FaultStack
from tests.support.tools import marks
from tests.support.waiting import wait_for
from tests.support.web import serving


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


def test_a_submitter_at_its_open_batches_cap_is_refused_until_one_ends(limited, workspace):
    rt, who, _ = limited({"size": {"open_batches_per_key": 1}})
    first = rt.submit(naps(1, seconds=1.0), mode="auto", workspace=workspace, submitter=who)
    with pytest.raises(TooManyOpenBatches, match=f"{who} has 1 batches open"):
        rt.submit(naps(1), mode="auto", workspace=workspace, submitter=who)
    assert all(r.ok for r in first.results(timeout=60))
    # the batch's row ends just after its last result
    wait_for(lambda: not rt.ledger.open_batches(who), 60, "end of the open batch's row")
    assert rt.submit(naps(1), mode="auto", workspace=workspace, submitter=who).results(timeout=60)


def rt_key_id(key: str) -> str:
    from runtime.client.intake import keyed_id

    return keyed_id(key)


def test_fair_share_another_keys_call_ends_while_a_flood_is_still_queued(limited, workspace):
    rt, flooder, _ = limited({"fair_share": {"in_flight_per_key": 4}})
    other = f"other-{uuid.uuid4().hex[:8]}"
    flood = rt.submit(naps(300, 0.02, "a"), mode="auto", workspace=workspace, submitter=flooder)
    wait_for(lambda: marks(workspace, "starts"), what="the flood running")  # the rest queued
    mine = rt.submit(naps(1, 0.0, "b"), mode="auto", workspace=workspace, submitter=other)
    (result,) = mine.results(timeout=120)
    assert result.ok
    assert not flood.done  # B's call did not wait for A's flood to drain
    assert all(r.ok for r in flood.results(timeout=300))


# Two reads workers and their own Redis: rates across workers and client
# processes, and a slot held by a worker that is SIGKILLed.
SOLO = {"name": "solo", "per": "tool", "tools": ["slow_bump"], "max": 1}
FIVE = {"name": "five", "per": "tool", "tools": ["nap"], "limit": "5/second"}


@pytest.fixture(scope="module")
def fault_stack(tmp_path_factory, user_settings):
    home = tmp_path_factory.mktemp("limits")
    policy = home / "org.json"
    policy.write_text(json.dumps({"limits": {"rate": [FIVE], "concurrency": [SOLO]}}))
    with FaultStack(
        home,
        user_settings=user_settings,
        visibility_timeout=3600,
        reads_workers=2,
        default_timeout=4.0,
        lease_seconds=2.0,
        resend_after=2.0,
        policy_file=policy,
    ) as stack:
        env = stack.client_env
        stack.client_env = lambda: {**env(), "TOOLRUN_POLICY_FILE": str(policy)}
        with stack.client() as runtime:
            yield stack, runtime


def test_a_rate_of_five_a_second_holds_across_two_workers_and_two_clients(fault_stack, tmp_path):
    stack, runtime = fault_stack
    spaces = [tmp_path / "one", tmp_path / "two"]
    clients = []
    for index, space in enumerate(spaces):
        space.mkdir()
        spec = {"calls": naps(10, prefix=f"p{index}"), "mode": "auto", "workspace": str(space)}
        clients.append(submitter.start(stack, {**spec, "timeout": 120}, results=True))
    batches = []
    for process in clients:
        out, _ = process.communicate(timeout=180)
        lines = out.strip().splitlines()
        assert len(lines) >= 2, submitter.last_words(process)
        batches.append(lines[0])
        assert set(json.loads(lines[-1]).values()) == {"ok"}
    starts = [
        row.started_at.timestamp() for batch in batches for row in runtime.ledger.calls(batch)
    ]
    assert len(starts) == 20
    per_second = Counter(int(at) for at in starts)
    assert max(per_second.values()) <= 5, sorted(per_second.items())


def test_a_sigkilled_workers_slot_frees_within_its_lease(fault_stack, workspace):
    stack, runtime = fault_stack
    if not stack.workers("effects"):
        stack.add_worker("effects")
    allow = {"allow": ["slow_bump"]}
    first = runtime.submit(
        [{"id": "w", "name": "slow_bump", "arguments": {"label": "dead", "seconds": 3.5}}],
        mode="default",
        workspace=workspace,
        rules=allow,
        timeout=300,
    )
    wait_for(lambda: marks(workspace, "effects"), timeout=60, what="the first call running")
    client = redis.Redis.from_url(stack.redis_url)
    (slot,) = client.keys(slots_key("*:solo:tool:slow_bump"))
    ((member, lapses),) = client.zrange(slot, 0, -1, withscores=True)
    assert member.decode() == f"{first.batch_id} w"
    [victim] = stack.workers("effects")
    stack.kill_worker(victim)
    stack.add_worker("effects")
    second = runtime.submit(
        [{"id": "x", "name": "slow_bump", "arguments": {"label": "next"}}],
        mode="default",
        workspace=workspace,
        rules=allow,
        timeout=300,
    )
    (result,) = second.results(timeout=120)
    assert result.ok, result.model_message
    (started,) = [m["at"] for m in marks(workspace, "effects") if m["label"] == "next"]
    assert lapses - 0.5 <= started <= lapses + 60  # not before the lease lapsed; soon after
    (lost,) = first.results(timeout=60)
    assert lost.status is Status.outcome_unknown


SPELLINGS = ["127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "localhost"]


def test_a_per_host_rate_counts_every_spelling_of_one_address(stack, user_settings, tmp_path):
    """A rate of 3/minute per host, reached at 127.0.0.1: the other spellings
    the resolver reads as that address are the same host, refused too (issue 40)."""
    policy = tmp_path / "org.json"
    rate = {"name": "hosts", "per": "host", "limit": "3/minute", "on_limit": "refuse"}
    policy.write_text(json.dumps({"limits": {"rate": [rate]}, "internal_hosts": ["127.0.0.0/8"]}))
    rt = runtime_on(stack, user_settings, policy_file=policy)
    try:
        with serving() as port:
            calls = [
                {"id": f"h{i}", "name": "http_get", "arguments": {"url": f"http://{h}:{port}/"}}
                for i, h in enumerate(["127.0.0.1"] * 2 + SPELLINGS)
            ]
            who = f"tester-{uuid.uuid4().hex[:8]}"
            handle = rt.submit(
                calls, mode="bypass", workspace=tmp_path, submitter=who, on_error="continue"
            )
            results = handle.results(timeout=120)
    finally:
        rt.close()
    statuses = [r.status for r in results]
    assert statuses[:3] == [Status.ok] * 3, [r.model_message for r in results[:3]]
    assert statuses[3:] == [Status.rate_limited] * 5, [r.model_message for r in results]
    assert all(r.content["scope"] == "127.0.0.1" for r in results[3:])
