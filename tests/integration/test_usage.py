"""Usage and budgets on real Redis and real worker processes
(docs/architecture.md, "Usage and budgets"): a budget refuses the call that
would pass it, says so in every provider dialect and names itself in the
ledger, and two submitters racing for its last calls cannot both have them;
per-call CPU times add up to what the worker process spent; `toolrun usage`
rolls the ledger up; a provider response's tokens are kept with its batch."""

from __future__ import annotations

import json
import os
import threading
import uuid

import pytest
import redis

from runtime import adapters
from runtime.gateway.metrics import Metrics
from runtime.keyspace.names import budget_key
from runtime.transcript import render
from runtime.types import Status
from tests.conftest import runtime_on
from tests.support.cli import stack_env, toolrun
from tests.support.faults import FaultStack

# The per-call CPU sums must land within this of the worker process's own count:
# the process also decodes, checks, records and publishes each call, and runs
# its sweep and heartbeat, none of which is a tool's (about 5 ms a call here).
CPU_SHORT_BY = 0.15  # the calls' sum may be short of the process's by 15 %, at most
CPU_SLACK_S = 0.05  # and may pass it by no more than the clock's ticks (10 ms each)


def echoes(count: int, prefix: str = "e") -> list[dict]:
    return [
        {"id": f"{prefix}{i}", "name": "echo", "arguments": {"text": "x"}} for i in range(count)
    ]


@pytest.fixture
def budgeted(stack, user_settings, tmp_path):
    """A client under an org policy with a daily calls budget per principal,
    and a unique principal so other tests' counts never meet its own."""
    policy = tmp_path / "org.json"
    budget = {"name": "daily", "per": "principal", "window": "day", "calls": 4}
    prices = {"echo": {"per_call": 0.002, "per_second": 0.01}}
    policy.write_text(json.dumps({"limits": {"budget": [budget]}, "prices": prices}))
    rt = runtime_on(stack, user_settings, policy_file=policy)
    yield rt, f"tester-{uuid.uuid4().hex[:8]}", policy
    rt.close()


def test_a_budget_refuses_the_call_that_would_pass_it_and_says_so(budgeted, workspace, stack):
    rt, who, policy = budgeted
    first = rt.submit(echoes(3), mode="auto", workspace=workspace, submitter=who)
    assert all(r.ok for r in first.results(timeout=60))
    second = rt.submit(echoes(2), mode="auto", workspace=workspace, submitter=who)
    ran, refused = second.results(timeout=60)
    assert ran.ok and refused.status is Status.over_budget
    message = refused.model_message
    assert f"budget 'daily' (4 calls per principal per day, from {policy})" in message
    assert "4 calls used, 0 calls left" in message and "It resets at" in message
    assert refused.content["retry_after_s"] > 0
    # The ledger names the budget and its file.
    rows = [e for e in rt.ledger.events(second.batch_id, refused.call_id) if e.rule]
    assert [(e.rule, e.source) for e in rows] == [("budget:daily", str(policy))]
    # The counter is Redis's, and holds the calls that ran.
    client = redis.Redis.from_url(stack.redis_url)
    (key,) = client.keys(budget_key(f"*:daily:{who}:*"))
    assert float(client.get(key)) == 4
    # Every provider dialect hands the model the refusal as an error it can read.
    (block,) = [b for b in adapters.reply("anthropic", [refused])["content"]]
    assert block["is_error"] is True and "over budget" in json.dumps(block)
    (chat,) = adapters.reply("openai", [refused])
    assert "over budget" in chat["content"]
    (item,) = adapters.reply("responses", [refused])
    assert "over budget" in item["output"]
    # What it cost: priced per call and per worker-second, rolled up by `toolrun usage`.
    assert ran.usage.price_per_call == 0.002 and ran.usage.cost >= 0.002
    found = toolrun(
        "usage",
        "--by",
        "tool",
        "--key",
        who,
        "--json",
        env=stack_env(stack, rt.settings.user_settings_file),
    )
    assert found.returncode == 0, found.stderr
    (row,) = json.loads(found.stdout)
    assert (row["tool"], row["calls"], row["ran"], row["ok"]) == ("echo", 5, 4, 4)
    assert row["worker_seconds"] > 0 and row["cost"] >= 4 * 0.002
    # /metrics says what each submitter has used and has left of the budget now.
    text = Metrics(rt).text().decode()
    labels = f'budget="daily",key="{who}",measure="calls",window="{key.decode()[-10:]}"'
    assert f"toolrun_budget_used{{{labels}}} 4.0" in text, text
    assert f"toolrun_budget_remaining{{{labels}}} 0.0" in text
    table = toolrun(
        "usage", "--by", "day", "--key", who, env=stack_env(stack, rt.settings.user_settings_file)
    )
    assert table.returncode == 0 and "usage by day" in table.stdout


def test_a_worker_refuses_a_call_once_the_time_spent_since_its_admission_runs_a_budget_out(
    stack, user_settings, tmp_path, workspace
):
    """Every call passes admission (nothing spent yet); the worker adds the
    first one's worker-seconds and their money in Redis, and refuses the next
    right before it would run."""
    policy = tmp_path / "org.json"
    budgets = [
        {"name": "turn", "per": "batch", "worker_seconds": 0.5},
        {"name": "spend", "per": "batch", "money": 100},
    ]
    prices = {"slow_write": {"per_second": 2.0}}
    policy.write_text(json.dumps({"limits": {"budget": budgets}, "prices": prices}))
    rt = runtime_on(stack, user_settings, policy_file=policy)
    try:
        calls = [
            {"id": f"w{i}", "name": "slow_write", "arguments": {"label": "t", "seconds": 0.6}}
            for i in range(3)
        ]
        handle = rt.submit(calls, mode="bypass", workspace=workspace, on_error="continue")
        results = handle.results(timeout=60)
    finally:
        rt.close()
    assert [r.status for r in results] == [Status.ok, Status.over_budget, Status.over_budget]
    assert "budget 'turn' (0.5 worker-seconds per batch" in results[1].model_message
    client = redis.Redis.from_url(stack.redis_url)
    spent = {
        key.decode().split(":")[3]: float(client.get(key))
        for key in client.keys(budget_key(f"*:{handle.batch_id}:batch"))
    }
    assert spent["turn"] >= 0.6 and spent["spend"] == pytest.approx(2 * spent["turn"], rel=1e-6)


def test_two_submitters_racing_for_a_budgets_last_calls_cannot_both_have_them(budgeted, workspace):
    rt, who, _ = budgeted
    handles, start = [], threading.Barrier(2)

    def submit(prefix: str) -> None:
        start.wait()
        handles.append(
            rt.submit(echoes(3, prefix), mode="auto", workspace=workspace, submitter=who)
        )

    threads = [threading.Thread(target=submit, args=(p,)) for p in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    statuses = [r.status for h in handles for r in h.results(timeout=60)]
    assert statuses.count(Status.ok) == 4 and statuses.count(Status.over_budget) == 2


def test_tokens_of_a_provider_response_are_kept_with_its_batch(runtime, workspace, stack):
    who = f"model-{uuid.uuid4().hex[:8]}"
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "x"}}],
        "usage": {"input_tokens": 1200, "output_tokens": 80},
    }
    handle = runtime.submit_message(message, mode="auto", workspace=workspace, submitter=who)
    assert handle.results(timeout=60)[0].ok
    total = handle.usage()
    assert (total["input_tokens"], total["output_tokens"]) == (1200, 80)
    transcript = runtime.transcript(handle.batch_id)
    assert transcript["totals"]["usage"]["model"] == "claude-test"
    text = render(transcript, "md")
    assert "tokens 1200 in / 80 out (claude-test)" in text, text
    (row,) = runtime.ledger.usage("key", submitter=who)
    assert (row["input_tokens"], row["output_tokens"], row["calls"]) == (1200, 80, 1)


def test_per_call_cpu_adds_up_to_what_the_worker_process_spent(tmp_path, user_settings):
    """One effects pool process runs every call: the calls' CPU (each its
    own and its child's) must add up to the process's own count, within
    the tolerance above."""
    with FaultStack(
        tmp_path / "home", user_settings=user_settings, effects_concurrency=1, reads_workers=1
    ) as stack:
        with stack.client() as rt:
            warm = rt.submit([_burn("w", 0, 0)], mode="bypass", workspace=tmp_path)
            assert warm.results(timeout=60)[0].ok  # the pool process has started and settled
            (worker,) = stack.workers("effects")
            (pid,) = stack.pool_processes(worker)
            before = _cpu(pid)
            calls = [_burn(f"b{i}", 120, 60 if i % 2 else 0) for i in range(8)]
            handle = rt.submit(calls, mode="bypass", workspace=tmp_path)
            results = handle.results(timeout=120)
            spent = _cpu(pid) - before
            assert stack.pool_processes(worker) == [pid]  # the same process ran them all
    assert all(r.ok for r in results), [r.model_message for r in results]
    summed = sum(r.usage.cpu_ms for r in results) / 1000
    print(f"per-call CPU summed {summed:.3f} s; the pool process spent {spent:.3f} s")
    assert summed >= 8 * 0.12 + 4 * 0.06 - CPU_SLACK_S  # the children were counted
    assert summed <= spent + CPU_SLACK_S, (summed, spent)
    assert summed >= spent * (1 - CPU_SHORT_BY), (summed, spent)
    assert all(r.usage.reported == {"burns": 1.0} for r in results)


def _burn(call_id: str, ms: int, child_ms: int) -> dict:
    return {
        "id": call_id,
        "name": "burn",
        "arguments": {"label": call_id, "ms": ms, "child_ms": child_ms},
    }


def _cpu(pid: int) -> float:
    """The process's CPU seconds, with those of the children it waited for."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")
