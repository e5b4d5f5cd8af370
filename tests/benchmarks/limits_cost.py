"""The CPU the limits' checks cost per call, measured alone, in the thread
that runs them (`time.thread_time`: no other thread of this process counts)
and in Redis: `python -m tests.benchmarks.limits_cost REDIS_URL [REPEATS]` (a
Redis database of your own: it is flushed; medians of REPEATS, default 5).
The figures of L1 in `make bench` are the same
cost seen in every process of a stack, where a 10 ms clock tick and pool
processes that come and go make them noisy on a busy machine; these are the
checks alone: the sender's look at a batch (`Flow.gate`, less the send
marks it rides), the worker's take
(`limits_at_start.entering`, riding its look at the call) and its release
(`Flow.finishing`, riding its publish of the end), each less the same
round trips without it, each pair in both orders, and Redis's own CPU
(INFO's used_cpu), per call, for one-call
batches (P1) and batches of ten (P3), with a rate and a cap configured, and
with fair share besides."""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path

import redis

from runtime.batch.limits_at_send import Flow
from runtime.batch.plan import BatchPlan
from runtime.execution import limits_at_start
from runtime.flow.limits import Limits
from runtime.gate.admission import admit
from runtime.results import endings
from runtime.tools.loading import load_tools
from runtime.transport.redis_state import RedisState
from runtime.types import Batch, Mode, ToolCall
from tests.benchmarks.tools import MODULE, NOOP
from tests.support.messages import policy, signed_plan

WORKSPACE = Path("/tmp")
WIDE = {  # limits that apply to every call and never hold one back (the bench's L1)
    "rate": [{"name": "wide", "per": "key", "limit": "1000000/second"}],
    "concurrency": [{"name": "wide", "per": "key", "max": 100000}],
    "fair_share": {"in_flight_per_key": 100000},
}


class Nowhere:
    def post(self, messages, *, parallel: bool, chained: bool = False) -> bool:
        return True


def plan_of(registry, limits: dict, size: int) -> BatchPlan:
    calls = [ToolCall(id=f"c{i}", name=NOOP, arguments={}) for i in range(size)]
    batch = Batch(calls=calls, mode=Mode.auto, workspace=str(WORKSPACE))
    rules = dataclasses.replace(policy(WORKSPACE), limits=limits).counted_for("bench")
    return signed_plan(registry, batch, rules)


CASES = ("a rate and a cap", "and fair share")


def measure(url: str, repeats: int = 5, calls: int = 1000) -> dict[str, list[dict[str, float]]]:
    """For each of P1 and P3 under each case (`CASES`), `repeats` times: the
    checks' CPU in ms per call, by part and in total (`total`); P1 over
    `calls` one-call batches, P3 over one and a half times as many calls."""
    registry = load_tools([MODULE], mcp_servers_file=None)
    client = redis.Redis.from_url(url)
    state = RedisState(client)
    flow = Flow(state=state, queue=Nowhere(), registry=registry)

    def redis_cpu() -> float:
        info = client.info("cpu")
        return info["used_cpu_user"] + info["used_cpu_sys"]

    checks = {"rates": WIDE["rate"], "caps": WIDE["concurrency"]}
    found: dict[str, list[dict[str, float]]] = {}
    for _ in range(repeats):
        for label, limits in zip(
            CASES, (checks, {**checks, "fair_share": WIDE["fair_share"]}), strict=True
        ):
            snapshot = Limits.model_validate(limits).snapshot()
            for figure, size, rounds in (("P1", 1, calls), ("P3", 10, max(1, calls * 3 // 20))):
                parts = _once(client, flow, state, registry, snapshot, size, rounds, redis_cpu)
                found.setdefault(f"{figure} ({label})", []).append(parts)
    state.close()
    return found


def _once(client, flow, state, registry, snapshot, size, rounds, redis_cpu) -> dict[str, float]:
    """One measure: the sender's look at each plan with its send marks (one
    round trip), less the marks alone (`mark_sent`, as a batch without
    limits is sent), here and in Redis (all of its CPU), then the worker's
    round trips around each call (its look before the tool, its publish
    after) with the checks riding them, less the same round trips without
    them, taking turns call by call. Redis's part is its own CPU (INFO's
    used_cpu_user and used_cpu_sys, from getrusage), riding less plain, both
    orders: not the time its commands ran (INFO commandstats), which is wall
    time and grows whenever another process takes Redis's core in the middle
    of a command, as it does on a busy 2-core machine."""
    client.flushdb()
    plans = [plan_of(registry, snapshot, size) for _ in range(rounds)]
    messages = [p.calls[c].message for p in plans for c in p.stages[0].calls]
    admitted = [
        admit(
            ToolCall(id=m.call_id, name=m.tool, arguments=m.arguments),
            registry=registry,
            mode=m.mode,
            workspace=WORKSPACE,
            policy=policy(WORKSPACE),
        )
        for m in messages
    ]
    ends = [endings.cancelled_before_start(m.call_id, m.tool) for m in messages]
    sent = redis_sent = 0.0  # the look riding the marks less the marks alone, both orders
    for index, turn in enumerate((True, False, False, True)):
        part = plans[index * len(plans) // 4 : (index + 1) * len(plans) // 4]
        for gated in (turn, not turn):
            sign = 1 if gated else -1
            before, began = redis_cpu(), time.thread_time()
            for p in part:
                if gated:
                    flow.gate(p, [[c] for c in p.stages[0].calls], conclude=None)
                else:
                    state.mark_sent(f"{p.batch.id}-plain", p.stages[0].calls)
            sent += sign * (time.thread_time() - began)
            redis_sent += sign * (redis_cpu() - before)
    spent = {True: [0.0, 0.0, 0.0], False: [0.0, 0.0, 0.0]}  # look, publish, Redis
    for index, turn in enumerate((True, False, False, True)):  # each half, in both orders
        part = slice(index * len(messages) // 4, (index + 1) * len(messages) // 4)
        run = list(zip(admitted[part], messages[part], ends[part], strict=True))
        for ridden in (turn, not turn):
            ran = redis_cpu()
            took, finished = _worker(state, flow, run, ridden=ridden)
            spent[ridden][0] += took
            spent[ridden][1] += finished
            spent[ridden][2] += redis_cpu() - ran
    n = len(messages)
    parts = {
        "send": sent,
        "worker check": spent[True][0] - spent[False][0],
        "finish": spent[True][1] - spent[False][1],
        "redis": redis_sent + spent[True][2] - spent[False][2],
    }
    parts = {k: 1000 * v / n for k, v in parts.items()}
    return {**parts, "total": sum(parts.values())}


def _worker(state, flow, run, *, ridden: bool) -> tuple[float, float]:
    """CPU seconds of the worker's look at each call and its publish of the
    call's end, with the checks riding them (`ridden`) or not (other
    batches' keys, so each round trip does the same work)."""
    took = finished = 0.0
    for admission, message, end in run:
        batch = message.batch_id if ridden else f"{message.batch_id}-plain"
        began = time.thread_time()
        taking = limits_at_start.entering(admission, message, state, lease=30.0) if ridden else None
        state.look(batch, message.call_id, hold=30.0, rider=taking)
        if taking is not None and taking.verdict is not admission:
            raise AssertionError(f"{message.call_id} did not pass its limits: {taking.verdict}")
        middle = time.thread_time()
        finishing = flow.finishing(message) if ridden else None
        state.publish(batch, end, reply_to=None, stage=0, rider=finishing)
        took, finished = took + middle - began, finished + time.thread_time() - middle
    return took, finished


if __name__ == "__main__":
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    for name, runs in measure(sys.argv[1], repeats).items():
        median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        text = ", ".join(f"{k} {v:.3f}" for k, v in median.items() if k != "total")
        totals = " ".join(f"{r['total']:.3f}" for r in runs)
        print(f"{name}: {text}; total {median['total']:.3f} ms per call (median of {totals})")
