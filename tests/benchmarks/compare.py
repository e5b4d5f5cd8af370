"""Both sides of every figure: a warm-up, then repetitions taken in turns, and
the `Figure` that compares their medians. `bench.py` owns the stack; `figures.py`
measures one repetition."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.console import Console

from tests.benchmarks import cpu, figures
from tests.benchmarks.harness import Harness
from tests.benchmarks.report import Figure, Target


def repeated(
    toolrun: Callable[[], Any],
    bare: Callable[[], Any],
    repeats: int,
    meter: cpu.Meter | None = None,
    calls: int = 1,
) -> tuple[list, list]:
    """One warm-up of each side, then `repeats` rounds in which the sides take
    turns; `meter` charges each round's CPU (of `calls` calls) to its side."""
    toolrun(), bare()
    ours, theirs = [], []
    for _ in range(repeats):
        if meter is None:
            ours.append(toolrun())
            theirs.append(bare())
        else:
            ours.append(meter.measure("toolrun", calls, toolrun))
            theirs.append(meter.measure("baseline", calls, bare))
    return ours, theirs


def measure(
    options: argparse.Namespace,
    sides: figures.Sides,
    console: Console,
    processes: dict[str, int] | None = None,
) -> list[Figure]:
    """P1 to P4; with `processes`, each of P1, P3 and P4 also says how much CPU
    every process spent per call on each side (`cpu_ms_per_call` in the JSON)."""
    meters = {key: cpu.Meter(processes) for key in ("P1", "P3", "P4")} if processes else {}
    latency = p1(options, sides, console, meters.get("P1"))
    wall = p2(options, sides, console)
    throughput = p3(options, sides, console, meters.get("P3"))
    steps = p4(options, sides, console, meters.get("P4"))
    found = [*latency, wall, throughput, steps]
    for figure in found:
        meter = meters.get(figure.key.split("_")[0])
        if meter is not None and figure.key != "P1_p99":
            figure.extra["cpu_ms_per_call"] = meter.per_call_ms()
    return found


def p1(
    options: argparse.Namespace,
    sides: figures.Sides,
    console: Console,
    meter: cpu.Meter | None = None,
) -> list[Figure]:
    """P1: the latency of one-call read batches, p50 and p99 (`--only P1` measures it alone)."""
    o, n, ms = options, options.repeats, lambda seconds: round(seconds * 1000, 3)
    console.log(f"P1: {o.p1_samples} one-call batches x {n}")
    ours, theirs = repeated(
        lambda: figures.p1_toolrun(sides, o.p1_samples),
        lambda: figures.p1_baseline(sides, o.p1_samples),
        n,
        meter,
        o.p1_samples,
    )
    latency = []
    for q in (0.5, 0.99):
        key = f"P1_p{round(q * 100)}"
        latency.append(
            Figure(
                key,
                f"1-call read batch latency, p{round(q * 100)}",
                "ms",
                Target("ratio", "<=", 1.2),  # issue 44's goal, p50 and p99
                [ms(figures.percentile(r, q)) for r in ours],
                [ms(figures.percentile(r, q)) for r in theirs],
                note="baseline: task.delay().get()",
            )
        )
    latency[0].extra["samples_ms"] = {
        "toolrun": [[ms(s) for s in r] for r in ours],
        "baseline": [[ms(s) for s in r] for r in theirs],
    }
    return latency


def p2(
    options: argparse.Namespace,
    sides: figures.Sides,
    console: Console,
    meter: cpu.Meter | None = None,
) -> Figure:
    """P2: the wall time of one batch of sleeping reads (`--only P2` measures it
    alone, with its CPU per call)."""
    o, n, ms = options, options.repeats, lambda seconds: round(seconds * 1000, 3)
    console.log(f"P2: {o.p2_calls} reads sleeping {o.p2_sleep:g} s x {n}")
    ours, theirs = repeated(
        lambda: figures.p2_toolrun(sides, o.p2_calls, o.p2_sleep),
        lambda: figures.p2_baseline(sides, o.p2_calls, o.p2_sleep),
        n,
        meter,
        o.p2_calls,
    )
    wall = Figure(
        "P2",
        f"{o.p2_calls} reads sleeping {ms(o.p2_sleep):g} ms, wall",
        "ms",
        Target("toolrun", "<=", ms(1.1 * o.p2_sleep)),
        [ms(v) for v in ours],
        [ms(v) for v in theirs],
        note="baseline: group(...).apply_async().get(), which polls every 0.5 s",
    )
    if meter is not None:
        wall.extra["cpu_ms_per_call"] = meter.per_call_ms()
    return wall


def p3(
    options: argparse.Namespace,
    sides: figures.Sides,
    console: Console,
    meter: cpu.Meter | None = None,
) -> Figure:
    """P3: the throughput of no-op reads in batches (`--only P3` measures it alone)."""
    o = options
    console.log(f"P3: {o.p3_calls} no-op reads in batches of {o.p3_batch} x {o.p3_repeats}")
    sizes = (o.p3_calls, o.p3_batch, o.p3_window)
    ours, theirs = repeated(
        lambda: figures.p3_toolrun(sides, *sizes),
        lambda: figures.p3_baseline(sides, *sizes),
        o.p3_repeats,
        meter,
        figures.batches(o.p3_calls, o.p3_batch) * o.p3_batch,
    )
    return Figure(
        "P3",
        f"no-op reads, batches of {o.p3_batch}",
        "calls/s",
        Target("ratio", ">=", 1.2),
        ours,
        theirs,
        note=f"{o.p3_window} batches in flight from one thread; "
        "baseline: a group per batch, .get()",
    )


def p4(
    options: argparse.Namespace,
    sides: figures.Sides,
    console: Console,
    meter: cpu.Meter | None = None,
) -> Figure:
    """P4: ordered writes, per step (`--only P4` measures it alone)."""
    o, n, ms = options, options.repeats, lambda seconds: round(seconds * 1000, 3)
    console.log(f"P4: {o.p4_steps} ordered no-op writes x {n}")
    ours, theirs = repeated(
        lambda: figures.p4_toolrun(sides, o.p4_steps),
        lambda: figures.p4_baseline(sides, o.p4_steps),
        n,
        meter,
        o.p4_steps,
    )
    return Figure(
        "P4",
        f"{o.p4_steps}-step ordered writes, per step",
        "ms",
        Target("ratio", "<=", 0.8),
        [ms(v) for v in ours],
        [ms(v) for v in theirs],
        note="baseline: chain(write.si() x steps).apply_async().get()",
    )


def memory(options: argparse.Namespace, bench: Harness, console: Console) -> Figure:
    """P6: top each side's reads worker up to `p6_calls` calls, then read the
    PSS of the worker and its pool (`--only P6` measures it alone)."""
    console.log(f"P6: PSS of the reads workers after {options.p6_calls} calls")
    sides = bench.sides
    for side, pump in (("toolrun", figures.p3_toolrun), ("baseline", figures.p3_baseline)):
        left = options.p6_calls - sides.reads_sent[side]
        if left > 0:
            pump(sides, left, options.p3_batch, options.p3_window)
    mib = {
        side: round(figures.pss_kib(bench.worker_pid(side, "reads")) / 1024, 1)
        for side in ("toolrun", "baseline")
    }
    return Figure(
        "P6",
        f"reads worker PSS after {options.p6_calls:,} calls",
        "MiB",
        Target("ratio", "<=", 1.3),
        [mib["toolrun"]],
        [mib["baseline"]],
        note="PSS (smaps_rollup) of the worker process and its prefork pool, both sides "
        "with the same concurrency, read once at the end (one reading, not a median)",
        extra={"calls": dict(sides.reads_sent)},
    )


def scaling(
    options: argparse.Namespace,
    sides: figures.Sides,
    second_workers: Callable[[], None],
    console: Console,
) -> Figure:
    """P5: one batch of sleeping reads with one reads worker on each side, then
    with two (`--only P5` measures it alone)."""
    o, n = options, options.repeats
    console.log(f"P5: {o.p5_calls} reads sleeping {o.p5_sleep:g} s, one reads worker, then two")
    toolrun = lambda: figures.p5_toolrun(sides, o.p5_calls, o.p5_sleep)  # noqa: E731
    bare = lambda: figures.p5_baseline(sides, o.p5_calls, o.p5_sleep)  # noqa: E731
    one = repeated(toolrun, bare, n)
    second_workers()
    two = repeated(toolrun, bare, n)
    ratios = [[b / a for a, b in zip(one[side], two[side], strict=True)] for side in (0, 1)]
    return Figure(
        "P5",
        f"{o.p5_calls} reads sleeping {o.p5_sleep * 1000:g} ms: 2 workers / 1",
        "x",
        Target("toolrun", ">=", 1.8),
        *ratios,
        note="throughput with two reads workers over one; the baseline column is bare "
        "Celery's own scaling, for comparison only (its group .get() polls every 0.5 s)",
        extra={
            "throughput_calls_per_s": {
                "toolrun": {"one_worker": one[0], "two_workers": two[0]},
                "baseline": {"one_worker": one[1], "two_workers": two[1]},
            }
        },
    )
