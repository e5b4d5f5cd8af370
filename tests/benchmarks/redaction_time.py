"""R1: the worker's time to redact one 32 KiB result, in-process: toolrun's
redactor (`runtime/redaction/redactor.py`) against the one before it
(`redaction_before.py`), on the same result, taking turns."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from runtime.redaction import redactor as redaction
from tests.benchmarks import redaction_before
from tests.benchmarks.compare import repeated
from tests.benchmarks.report import Figure, Target

ROOT = Path(__file__).resolve().parents[2]
RESULT_BYTES = 32 * 1024


def result() -> dict:
    """A read_file result at the result bound: this repository's source with a
    production .env (tests/data/secrets) in the middle of it."""
    env = (ROOT / "tests" / "data" / "secrets" / "production.env").read_text()
    source = "".join(p.read_text() for p in sorted((ROOT / "runtime").glob("*.py")))
    half = (RESULT_BYTES - len(env)) // 2
    text = source[:half] + env + source[half : 2 * half]
    return {
        "status": "ok",
        "content": {"path": "app/settings.py", "text": text},
        "message": f"{len(text)} characters of app/settings.py",
        "error": None,
    }


def median_ms(redact, value: dict, samples: int) -> float:
    spent = []
    for _ in range(samples):
        began = time.perf_counter()
        redact(value)
        spent.append(time.perf_counter() - began)
    return round(statistics.median(spent) * 1000, 3)


def figure(options: argparse.Namespace) -> Figure:
    value, samples = result(), options.r1_samples
    ours, theirs = repeated(
        lambda: median_ms(redaction.redact, value, samples),
        lambda: median_ms(redaction_before.redact, value, samples),
        options.repeats,
    )
    return Figure(
        "R1",
        "redacting a 32 KiB result, median",
        "ms",
        Target("toolrun", "<=", 2.0),
        ours,
        theirs,
        note="in-process; baseline: the redactor before issue 14 (11 hand-written patterns)",
    )
