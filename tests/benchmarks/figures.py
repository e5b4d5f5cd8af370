"""One repetition of each figure, for each side. Every function returns the
figure's value for that repetition; `bench.py` repeats, warms up and compares.

toolrun's side submits through `Runtime.submit` (auto mode, ledger on) and
waits on the handle; the baseline's side is what a user writes with bare
Celery: `delay().get()`, `group(...).apply_async().get()`, `chain(...)`.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from celery import chain, group

from runtime.client import Runtime
from runtime.types import Status, ToolResult
from tests.benchmarks import baseline, cpu
from tests.benchmarks.tools import NOOP, SLEEP, WRITE

WAIT = 120.0  # seconds any one batch may take before the run is called broken
WRITES = {"allow": [WRITE]}  # auto mode runs a write only where a rule allows it


class BenchError(RuntimeError):
    """A side answered something other than ok: its figure would mean nothing."""


@dataclass
class Sides:
    """The toolrun client and its workspace; reads each side has sent, for P6."""

    runtime: Runtime
    workspace: Path
    reads_sent: dict[str, int] = field(default_factory=lambda: {"toolrun": 0, "baseline": 0})


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def make_calls(name: str, count: int, **arguments) -> list[dict]:
    return [{"id": f"c{i}", "name": name, "arguments": arguments} for i in range(count)]


def submit(sides: Sides, calls: list[dict], *, rules: dict | None = None):
    return sides.runtime.submit(calls, mode="auto", workspace=sides.workspace, rules=rules)


def check(results: list[ToolResult], figure: str) -> None:
    bad = next((result for result in results if result.status is not Status.ok), None)
    if bad is not None:
        raise BenchError(f"{figure}: toolrun answered {bad.status}: {bad.model_message}")


def _timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


# P1: latency of a 1-call read batch, submit to result (a list of seconds per call).


def p1_toolrun(sides: Sides, samples: int) -> list[float]:
    def one() -> None:
        check(submit(sides, make_calls(NOOP, 1)).results(timeout=WAIT), "P1")

    sides.reads_sent["toolrun"] += samples
    return [_timed(one) for _ in range(samples)]


def p1_baseline(sides: Sides, samples: int) -> list[float]:
    sides.reads_sent["baseline"] += samples
    return [_timed(lambda: baseline.noop.delay().get(timeout=WAIT)) for _ in range(samples)]


# P2: wall time of `calls` reads that each sleep `seconds`, in one batch (seconds).


def p2_toolrun(sides: Sides, calls: int, seconds: float) -> float:
    def batch() -> None:
        check(submit(sides, make_calls(SLEEP, calls, seconds=seconds)).results(WAIT), "P2")

    sides.reads_sent["toolrun"] += calls
    return _timed(batch)


def p2_baseline(sides: Sides, calls: int, seconds: float) -> float:
    sides.reads_sent["baseline"] += calls
    work = group(baseline.nap.s(seconds) for _ in range(calls))
    return _timed(lambda: work.apply_async().get(timeout=WAIT))


# P3: throughput of no-op reads in batches of `size`, `window` batches in flight (calls/s).


def p3_toolrun(sides: Sides, calls: int, size: int, window: int) -> float:
    def start():
        return submit(sides, make_calls(NOOP, size))

    def finish(handle) -> None:
        check(handle.results(timeout=WAIT), "P3")

    sides.reads_sent["toolrun"] += batches(calls, size) * size
    return batches(calls, size) * size / _timed(lambda: _pump(calls, size, window, start, finish))


def p3_baseline(sides: Sides, calls: int, size: int, window: int) -> float:
    def start():
        return group(baseline.noop.s() for _ in range(size)).apply_async()

    def finish(pending) -> None:
        pending.get(timeout=WAIT)

    sides.reads_sent["baseline"] += batches(calls, size) * size
    return batches(calls, size) * size / _timed(lambda: _pump(calls, size, window, start, finish))


def batches(calls: int, size: int) -> int:
    return max(1, math.ceil(calls / size))


def _pump(calls: int, size: int, window: int, start: Callable, finish: Callable) -> None:
    """Keep `window` batches in flight from one thread, as an orchestrator serving
    several conversations would, until every batch has finished."""
    left, flying = batches(calls, size), deque()
    while left or flying:
        while left and len(flying) < window:
            flying.append(start())
            left -= 1
        finish(flying.popleft())


# P4: per-step time of an ordered batch of `steps` no-op writes (seconds per step).


def p4_toolrun(sides: Sides, steps: int) -> float:
    def batch() -> None:
        check(submit(sides, make_calls(WRITE, steps), rules=WRITES).results(WAIT), "P4")

    return _timed(batch) / steps


def p4_baseline(sides: Sides, steps: int) -> float:
    work = chain(baseline.write.si() for _ in range(steps))
    return _timed(lambda: work.apply_async().get(timeout=WAIT)) / steps


# P5: throughput of one batch of `calls` sleeping reads (calls/s); bench.py
# measures it with one reads worker and with two, and reports the ratio.


def p5_toolrun(sides: Sides, calls: int, seconds: float) -> float:
    return calls / p2_toolrun(sides, calls, seconds)


def p5_baseline(sides: Sides, calls: int, seconds: float) -> float:
    return calls / p2_baseline(sides, calls, seconds)


# P6: memory of a worker process and its pool, as the pages are shared (KiB), from /proc.


def pss_kib(pid: int) -> int:
    """The sum of Pss (each shared page divided among the processes mapping it)
    over `pid` and its descendants, from smaps_rollup: a prefork pool's pages
    shared with its parent count once, as the machine pays for them."""
    total = 0
    for proc in cpu.process_tree(pid):
        try:
            rollup = (proc / "smaps_rollup").read_text()
        except OSError:
            continue
        total += next(
            (int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0
        )
    return total
