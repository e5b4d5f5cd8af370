"""I1: how long a fresh process takes before it can do anything: `python -c "from
runtime import Runtime"` (an orchestrator's first line) and `toolrun --help` (every
command pays at least this). Wall milliseconds of a fresh interpreter, the median
of `i1_samples` per repetition; toolrun alone, against the issue's bound of 1 s.
Where the time goes: `python -X importtime -c "from runtime import Runtime"`."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from tests.benchmarks.report import Figure, Target

BOUND_MS = 1000.0


def commands() -> dict[str, tuple[str, list[str]]]:
    script = shutil.which("toolrun", path=os.path.dirname(sys.executable))
    toolrun = [script] if script else [sys.executable, "-m", "runtime.cli"]
    return {
        "I1_import": ("`from runtime import Runtime`", [sys.executable, "-c", IMPORT]),
        "I1_help": ("`toolrun --help`", [*toolrun, "--help"]),
    }


IMPORT = "from runtime import Runtime"


def median_ms(argv: list[str], samples: int) -> float:
    spent = []
    for _ in range(samples):
        began = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        spent.append(time.perf_counter() - began)
    return round(statistics.median(spent) * 1000, 1)


def figures(options: argparse.Namespace) -> list[Figure]:
    found = []
    for key, (title, argv) in commands().items():
        median_ms(argv, 1)  # warm-up: bytecode written, files in the page cache
        repetitions = [median_ms(argv, options.i1_samples) for _ in range(options.repeats)]
        found.append(
            Figure(
                key,
                f"start of {title} in a fresh process, median",
                "ms",
                Target("toolrun", "<=", BOUND_MS),
                repetitions,
                note="wall time; the machine's load moves it: note uptime's load with it",
            )
        )
    return found
