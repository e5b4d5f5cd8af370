"""`make bench` at tiny sizes: it starts its stack, measures both sides of every
figure and writes the JSON it promises. No time is asserted; the benchmark
itself reports, it does not judge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.report import ALONE, FIGURES

ROOT = Path(__file__).resolve().parents[1]
# One repetition of each figure after its warm-up: enough to show that every figure
# is measured on both sides and its ratio printed; how steady they are is `make bench`'s.
ONE_REPETITION = ["--repeats", "1", "--p3-repeats", "1"]


@pytest.mark.server  # the benchmark starts its own stacks
@pytest.mark.timeout(330)  # 45 s on a quiet machine; over 140 s at a load of 9 on 2 cores
def test_a_quick_run_writes_every_figure_with_both_sides_and_a_verdict(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.benchmarks.bench",
            "--quick",
            *ONE_REPETITION,
            "--out-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [written] = tmp_path.glob("bench-*.json")
    assert written.name in done.stdout
    report = json.loads(written.read_text())
    assert set(report["figures"]) == set(FIGURES)
    for key, figure in report["figures"].items():
        for side in ("toolrun",) if key in ALONE else ("toolrun", "baseline"):
            assert figure[side]["repetitions"], (key, side)
            assert figure[side]["median"] is not None, (key, side)
        assert (figure["ratio"] is None) == (key in ALONE), key
        assert {"of", "op", "value", "text"} <= set(figure["target"]), key
        assert isinstance(figure["pass"], bool), key
        assert key.split("_")[0] in done.stdout
    for key in ("P1_p50", "P3", "P4"):  # where each side's CPU went, per process
        spent = report["figures"][key]["cpu_ms_per_call"]
        assert set(spent) == {"toolrun", "baseline"}, key
        assert all(isinstance(ms, float) for side in spent.values() for ms in side.values())
    assert "CPU per call" in done.stdout
    assert {"pools", "sizes", "machine", "shared_celery_settings"} <= set(report)
    assert report["quick"] is True


@pytest.mark.server
@pytest.mark.timeout(150)
def test_a_run_with_ledger_puts_toolruns_side_on_that_postgresql(tmp_path):
    """`--ledger`: the stack's ledger is a database of the bench's own on that
    server (the JSON names the ledger the stack ran on, not the flag)."""
    url = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TOOLRUN_TEST_POSTGRES_URL not set: the bench's PostgreSQL ledger is skipped")
    done = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bench", "--quick", *ONE_REPETITION]
        + ["--only", "P1", "--ledger", url, "--out-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=140,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [written] = tmp_path.glob("bench-*.json")
    report = json.loads(written.read_text())
    assert report["ledger"].startswith("on: PostgreSQL, postgresql"), report["ledger"]
    assert "toolrun_test_" in report["ledger"]  # its own database, not the server's `test`
    assert report["figures"]["P1_p50"]["toolrun"]["repetitions"]
