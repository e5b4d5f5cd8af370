"""How the cost grows, each figure against its own small case in the same run
(docs/benchmarks, "Growth"):

- P8: P1 with the ledger holding `--p8-calls` ended calls (`bulk_ledger.py`)
  against the same ledger before they were loaded; on that grown ledger, how
  long `toolrun usage`'s rollups, one batch's transcript and the sweep's look
  at open batches take, and then what retention costs to remove them all.
- P9: one batch of `--p9-calls` no-op reads (the default size cap) against a
  Celery `group` of as many no-op tasks, wall time; and the client's memory
  for each (tracemalloc's peak, one extra run of each side).
- P10: P1 with `--p10-batches` batches open in the cluster, each waiting for an
  approval (opened by another client process, which leaves), against none.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tracemalloc
from datetime import timedelta

from celery import group
from rich.console import Console

from runtime.ledger import retention
from runtime.ledger.tables import utc_now
from runtime.transcript import build, render, seal
from tests.benchmarks import baseline, bulk_ledger, cpu, figures, open_batches
from tests.benchmarks.report import Figure, Target
from tests.benchmarks.tools import NOOP

WAIT = 600.0


def _p1_p50s(
    options: argparse.Namespace, sides: figures.Sides, meter: cpu.Meter | None = None, side=""
) -> list[float]:
    """P1's toolrun side, `repeats` times after a warm-up: each one's p50 (ms);
    `meter` charges each repetition's CPU (every process of the stack) to `side`."""
    samples = options.p1_samples
    figures.p1_toolrun(sides, samples)

    def one() -> list[float]:
        return figures.p1_toolrun(sides, samples)

    found = []
    for _ in range(options.repeats):
        seconds = one() if meter is None else meter.measure(side, samples, one)
        found.append(round(figures.percentile(seconds, 0.5) * 1000, 3))
    return found


def _timed_ms(work) -> float:
    began = time.perf_counter()
    work()
    return round((time.perf_counter() - began) * 1000, 1)


def p8(options: argparse.Namespace, bench, console: Console) -> list[Figure]:
    calls, ledger = options.p8_calls, bench.runtime.ledger
    console.log(f"P8: P1 on the ledger as it is, then with {calls:,} ended calls loaded")
    empty = _p1_p50s(options, bench.sides)
    size_empty = retention.size(ledger)
    loaded = bulk_ledger.load(bench.record.database_url, calls)
    console.log(f"P8: loaded {loaded['rows']:,} rows in {loaded['seconds']} s")
    grown = _p1_p50s(options, bench.sides)
    looks = _looks(bench)
    size_grown = retention.size(ledger)
    console.log("P8: retention removes every bulk batch")
    pruned = retention.prune(ledger, utc_now() - timedelta(minutes=30))
    size_pruned = retention.size(ledger)
    extra = {
        "loaded": loaded,
        "looks_ms": looks,
        "bytes": {"before": size_empty, "loaded": size_grown, "pruned": size_pruned},
        "prune": vars(pruned),
    }
    note = (
        f"ledger {_ledger_name(bench)}: {size_grown / 2**20:,.0f} MiB with {calls:,} ended calls "
        f"in {loaded['batches']:,} batches; on it: "
        + ", ".join(f"{k} {v} ms" for k, v in looks.items())
    )
    seconds_per_100k = round(pruned.seconds / max(calls, 1) * 100_000, 2)
    return [
        Figure(
            "P8",
            f"P1 p50 with {calls:,} ended calls in the ledger, against an empty one",
            "ms",
            Target("ratio", "<=", 1.1),
            grown,
            empty,
            note=note,
            extra=extra,
        ),
        Figure(
            "P8_look",
            "the slowest of usage over 7 days, a transcript and the sweep's look, on that ledger",
            "ms",
            Target("toolrun", "<=", 2000),
            [max(v for k, v in looks.items() if k != "usage_by_key_all")],
            note="bound: each at most 2 s on a million calls; a rollup of the whole ledger "
            f"(usage_by_key_all, {looks['usage_by_key_all']:,.0f} ms) reads every call's "
            "row and grows with them: its bound is per call, not per ledger",
            extra={"looks_ms": looks},
        ),
        Figure(
            "P8_prune",
            "retention's removal, per 100,000 calls (export off)",
            "s",
            Target("toolrun", "<=", 30),
            [seconds_per_100k],
            note=f"{pruned.batches:,} batches in {pruned.seconds} s, of which the space "
            f"{pruned.reclaim_seconds} s; {pruned.reclaimed}; "
            f"{size_grown / 2**20:,.0f} -> {size_pruned / 2**20:,.0f} MiB",
            extra={"prune": vars(pruned)},
        ),
    ]


def _looks(bench) -> dict[str, float]:
    """What reads the whole ledger, timed once each on the grown ledger (ms)."""
    from runtime import config

    ledger, key = bench.runtime.ledger, config.signing_key(bench.runtime.settings)
    now = utc_now()
    one = retention.due(ledger, now, limit=1)[0]
    export_dir = bench.settings.home / "p8-export"
    from runtime.transcript.archive import exporter

    export = exporter(ledger, export_dir, key)
    render(seal(build(ledger, one), key), "jsonl")  # its modules imported, its statements built
    return {
        "usage_by_day_7d": _timed_ms(lambda: ledger.usage("day", since=now - timedelta(days=7))),
        "usage_by_key_all": _timed_ms(lambda: ledger.usage("key")),
        "usage_one_key_7d": _timed_ms(
            lambda: ledger.usage("tool", since=now - timedelta(days=7), submitter="key:k7")
        ),
        "transcript": _timed_ms(lambda: render(seal(build(ledger, one), key), "jsonl")),
        "transcript_export": _timed_ms(lambda: export(one)),
        "sweep_look": _timed_ms(
            lambda: ledger.needing_attention(now=now, stale_before=now - timedelta(seconds=15))
        ),
    }


def _ledger_name(bench) -> str:
    return "PostgreSQL" if bench.record.database_url.startswith("postgresql") else "SQLite"


def p9(options: argparse.Namespace, bench, console: Console) -> list[Figure]:
    calls, sides, n = options.p9_calls, bench.sides, options.repeats
    console.log(f"P9: one batch of {calls:,} no-op reads against a group of {calls:,} x {n}")

    def ours() -> None:
        figures.check(figures.submit(sides, figures.make_calls(NOOP, calls)).results(WAIT), "P9")

    def theirs() -> None:
        group(baseline.noop.s() for _ in range(calls)).apply_async().get(timeout=WAIT)

    wall_ours, wall_theirs = [], []
    ours(), theirs()
    for _ in range(n):
        wall_ours.append(_timed_ms(ours))
        wall_theirs.append(_timed_ms(theirs))
    sides.reads_sent["toolrun"] += calls * (n + 1)
    sides.reads_sent["baseline"] += calls * (n + 1)
    memory = {"toolrun": _peak_kib(ours), "baseline": _peak_kib(theirs)}
    return [
        Figure(
            "P9",
            f"one batch of {calls:,} no-op reads, wall",
            "ms",
            Target("ratio", "<=", 1.0),
            wall_ours,
            wall_theirs,
            note="baseline: group(noop.s() x N).apply_async().get()",
        ),
        Figure(
            "P9_mem",
            "the client's memory for that batch (tracemalloc peak)",
            "KiB",
            Target("ratio", "<=", 2.0),
            [memory["toolrun"]],
            [memory["baseline"]],
            note="Python allocations of the client process while it submits and waits, "
            "one run of each side with tracemalloc on",
        ),
    ]


def _peak_kib(work) -> float:
    tracemalloc.start()
    try:
        work()
        return round(tracemalloc.get_traced_memory()[1] / 1024, 1)
    finally:
        tracemalloc.stop()


def p10(options: argparse.Namespace, bench, console: Console) -> Figure:
    count = options.p10_batches
    console.log(f"P10: P1 with none open, then with {count:,} batches waiting for approval")
    meter = cpu.Meter(bench.processes())
    none_open = _p1_p50s(options, bench.sides, meter, "baseline")
    ids = _open(bench, count)
    try:
        many_open = _p1_p50s(options, bench.sides, meter, "toolrun")
    finally:
        console.log(f"P10: cancelling the {len(ids):,} open batches")
        for batch_id in ids:
            bench.runtime.cancel(batch_id, by="bench")
    return Figure(
        "P10",
        f"P1 p50 with {count:,} batches open (waiting for approval), against none",
        "ms",
        Target("ratio", "<=", 1.1),
        many_open,
        none_open,
        note="opened by another client process, which left them to the cluster; "
        "cpu_ms_per_call: 'toolrun' with them open, 'baseline' with none",
        extra={"opened": len(ids), "cpu_ms_per_call": meter.per_call_ms()},
    )


def _open(bench, count: int) -> list[str]:
    """`count` one-call batches waiting for approval, opened by a client process
    of its own that leaves them open when it exits."""
    command = [sys.executable, "-m", "tests.benchmarks.growth", "--open", str(count)]
    done = subprocess.run(
        command, env=bench.client_env(), capture_output=True, text=True, timeout=WAIT, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"P10's opener failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _opener(count: int) -> list[str]:
    from pathlib import Path

    from runtime.client import Runtime

    runtime = Runtime.from_env()
    workspace = Path(runtime.settings.home) / "workspace"
    try:
        return [handle.batch_id for handle in open_batches.waiting(runtime, workspace, count)]
    finally:
        runtime.close(cancel=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.growth")
    parser.add_argument("--open", type=int, required=True)
    print(json.dumps(_opener(parser.parse_args().open)), flush=True)
