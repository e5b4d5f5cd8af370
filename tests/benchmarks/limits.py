"""F1 and L1: flow control's figures, toolrun alone (docs/architecture.md,
"Flow control").

F1, fair share: the latency of a 1-call batch from key B while key A has
`--f1-flood` no-op reads queued, as a ratio to its latency on the idle
cluster (the "baseline" column here is toolrun idle, not bare Celery).
`without_fair_share_ms` is the same latency under a policy without fair
share, for contrast.

L1, the cost of the checks, under a policy with a rate, a concurrency cap
and fair share configured (none of them ever reached): its figure is the
checks' CPU per call measured alone (`limits_cost.py`: the sender's look,
the worker's take, the finish and Redis's own CPU, on a database of the
bench's Redis of its own), per repetition. Beside it, in `whole_stack_ms`,
the same cost seen across the stack: CPU per call (client, workers and
Redis) of P1's one-call batches and P3's no-op reads with the limits less
without, repetitions taking turns; on a busy machine a 10 ms clock tick over
pool processes that come and go makes that one too noisy to read alone.
"""

from __future__ import annotations

import argparse
import statistics
import time
from urllib.parse import urlsplit, urlunsplit

from rich.console import Console

from runtime.client import Runtime
from tests.benchmarks import cpu, figures, limits_cost
from tests.benchmarks.harness import Harness
from tests.benchmarks.limits_cost import WIDE
from tests.benchmarks.report import Figure, Target
from tests.benchmarks.tools import NOOP


def runtime_with(bench: Harness, limits: dict) -> Runtime:
    """A client of the bench's stack under an org policy of `limits`."""
    return bench.client_under({"limits": limits})


def f1(options: argparse.Namespace, bench: Harness, console: Console) -> Figure:
    flood, samples, share = options.f1_flood, options.f1_samples, options.f1_share
    console.log(f"F1: key B's 1-call batch with key A's {flood} no-op reads queued")
    size = {"size": {"calls_per_batch": flood}}
    shared = runtime_with(bench, {"fair_share": {"in_flight_per_key": share}, **size})
    plain = runtime_with(bench, size)
    workspace = bench.sides.workspace
    try:
        one = lambda rt: _one(rt, workspace)  # noqa: E731
        one(shared), one(plain)  # warm-up
        idle, loaded, queued = [], [], []
        for _ in range(options.repeats):
            idle.append(statistics.median(one(shared) for _ in range(samples)))
            a = _flood(shared, workspace, flood)
            loaded.append(statistics.median(one(shared) for _ in range(samples)))
            queued.append(not a.done)
            figures.check(a.results(timeout=figures.WAIT * 5), "F1")
        a = _flood(plain, workspace, flood)
        without = one(plain)
        figures.check(a.results(timeout=figures.WAIT * 5), "F1")
    finally:
        shared.close()
        plain.close()
    ms = lambda values: [round(v * 1000, 3) for v in values]  # noqa: E731
    return Figure(
        "F1",
        f"key B's 1-call batch, key A's {flood:,} reads queued / idle",
        "ms",
        Target("ratio", "<=", 3.0),
        ms(loaded),
        ms(idle),
        note=f"baseline: the same batch on the idle cluster (toolrun); fair share "
        f"{share} reads in flight per key; medians of {samples} batches",
        extra={
            "without_fair_share_ms": round(without * 1000, 3),
            "flood_still_queued": queued,
        },
    )


def l1(options: argparse.Namespace, bench: Harness, console: Console) -> list[Figure]:
    console.log("L1: CPU per call of P1 and P3 with limits configured, less without")
    limited = runtime_with(bench, WIDE)
    sides = {
        "plain": figures.Sides(bench.runtime, bench.sides.workspace),
        "limited": figures.Sides(limited, bench.sides.workspace),
    }
    o = options
    p3_calls = figures.batches(o.p3_calls, o.p3_batch) * o.p3_batch
    work = {
        "P1": (lambda s: figures.p1_toolrun(s, o.p1_samples), o.p1_samples),
        "P3": (lambda s: figures.p3_toolrun(s, o.p3_calls, o.p3_batch, o.p3_window), p3_calls),
    }
    console.log("L1: the checks alone (limits_cost)")
    alone = limits_cost.measure(_own_database(bench.record.redis_url), o.repeats, o.l1_calls)
    found = []
    try:
        for key, (run, calls) in work.items():
            run(sides["plain"]), run(sides["limited"])  # warm-up
            added, spent, where = [], {}, {}
            for _ in range(o.repeats):
                for name in ("plain", "limited"):
                    meter = cpu.Meter(bench.processes())
                    meter.measure(name, calls, lambda r=run, n=name: r(sides[n]))
                    where[name] = meter.per_call_ms()[name]
                    spent[name] = sum(where[name].values())
                added.append(round(spent["limited"] - spent["plain"], 3))
            runs = alone[f"{key} (and fair share)"]
            found.append(
                Figure(
                    f"L1_{key}",
                    f"CPU per call the limits add to {key}",
                    "ms",
                    Target("toolrun", "<=", 0.3),
                    [round(r["total"], 3) for r in runs],
                    note="a rate, a concurrency cap and fair share, none reached: the "
                    "checks alone (limits_cost: sender, worker, finish, Redis); "
                    "whole_stack_ms: every process of the stack, with limits less without",
                    extra={
                        "whole_stack_ms": added,
                        "alone_parts_ms": {
                            part: round(statistics.median(r[part] for r in runs), 3)
                            for part in runs[0]
                        },
                        "alone_rate_and_cap_ms": [
                            round(r["total"], 3) for r in alone[f"{key} (a rate and a cap)"]
                        ],
                        "cpu_ms_per_call_last": where,
                    },
                )
            )
    finally:
        limited.close()
    return found


def _own_database(url: str) -> str:
    """The bench's Redis, database 15: `limits_cost` flushes the one it is given."""
    return urlunsplit(urlsplit(url)._replace(path="/15"))


def _one(runtime: Runtime, workspace) -> float:
    started = time.perf_counter()
    handle = runtime.submit(
        figures.make_calls(NOOP, 1), mode="auto", workspace=workspace, submitter="bench-b"
    )
    figures.check(handle.results(timeout=figures.WAIT), "F1")
    return time.perf_counter() - started


def _flood(runtime: Runtime, workspace, calls: int):
    return runtime.submit(
        figures.make_calls(NOOP, calls), mode="auto", workspace=workspace, submitter="bench-a"
    )
