"""S1, the sandbox's cost (docs/architecture.md, "The sandbox"): the latency of a
one-call `shell` batch running `true`, submit to result, sandboxed (the default)
against unconfined (an org policy with `"sandbox": {"enabled": false}`) on the
same stack in the same run, the sides taking turns. Its target is what the
sandbox adds: a few milliseconds (bubblewrap's namespaces and mounts)."""

from __future__ import annotations

import argparse
import statistics
import time

from rich.console import Console

from runtime.client import Runtime
from tests.benchmarks import figures
from tests.benchmarks.harness import Harness
from tests.benchmarks.report import Figure, Target

RULES = {"allow": ["shell(true)"]}
CALL = [{"id": "s", "name": "shell", "arguments": {"command": "true"}}]


def s1(options: argparse.Namespace, bench: Harness, console: Console) -> Figure:
    samples = options.s1_samples
    console.log(f"S1: one-call shell `true` batches, sandboxed and unconfined, {samples} each")
    unconfined = bench.client_under({"sandbox": {"enabled": False}})
    sides = {"sandboxed": bench.runtime, "unconfined": unconfined}
    found: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for runtime in sides.values():
            _one(runtime, bench)  # warm-up
        for _ in range(options.repeats):
            for name, runtime in sides.items():
                found[name].append(statistics.median(_one(runtime, bench) for _ in range(samples)))
    finally:
        unconfined.close()
    ms = lambda values: [round(v * 1000, 3) for v in values]  # noqa: E731
    return Figure(
        "S1",
        "1-call shell `true` batch, sandboxed / unconfined",
        "ms",
        Target("added", "<=", 5.0),
        ms(found["sandboxed"]),
        ms(found["unconfined"]),
        note=f"baseline: the same batch unconfined (toolrun, org policy sandbox.enabled "
        f"false); medians of {samples} batches",
    )


def _one(runtime: Runtime, bench: Harness) -> float:
    started = time.perf_counter()
    handle = runtime.submit(CALL, mode="auto", workspace=bench.sides.workspace, rules=RULES)
    figures.check(handle.results(timeout=figures.WAIT), "S1")
    return time.perf_counter() - started
