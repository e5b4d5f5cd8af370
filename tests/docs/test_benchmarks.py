"""The benchmark page's figures: a dated table made from the newest bench JSON
under docs/benchmarks/ (docsgen/benchmarks.py), so new figures are a new file."""

from __future__ import annotations

import json

import pytest

from docsgen import benchmarks
from tests.docs.conftest import REPO, Built

pytestmark = pytest.mark.timeout(600)  # the build, on a busy machine


def test_the_benchmark_page_shows_the_committed_json(built_site: Built):
    committed = benchmarks.newest(REPO / "docs" / "benchmarks")
    assert committed is not None, "a bench JSON is committed under docs/benchmarks/"
    page = (built_site.site / "benchmarks" / "index.html").read_text()
    assert committed.name in page
    assert "Figures of " in page
    for key in json.loads(committed.read_text())["figures"]:
        assert f"{key} " in page, key


def _run(started_at: str, p1: float) -> dict:
    figure = {
        "title": "1-call read batch, p50",
        "unit": "ms",
        "toolrun": {"repetitions": [p1], "median": p1},
        "baseline": {"repetitions": [2.0], "median": 2.0},
        "ratio": p1 / 2.0,
        "target": {"of": "ratio", "op": "<=", "value": 1.5, "text": "ratio <= 1.5"},
        "pass": p1 / 2.0 <= 1.5,
        "cpu_ms_per_call": {"toolrun": {"client": 1.0, "toolrun-reads-1": 2.0, "redis": 0.5}},
    }
    return {"started_at": started_at, "caption": "both sides", "figures": {"P1_p50": figure}}


def test_the_newest_run_makes_the_table(tmp_path):
    (tmp_path / "bench-old.json").write_text(json.dumps(_run("20261130T150448Z", 9.0)))
    (tmp_path / "bench-new.json").write_text(json.dumps(_run("20261201T061500Z", 2.5)))
    page = benchmarks.render(f"# B\n\n{benchmarks.MARKER}\n", tmp_path)
    assert "Figures of 2026-12-01 06:15 UTC" in page
    assert "bench-new.json" in page and "bench-old.json" not in page
    assert "| P1_p50 1-call read batch, p50 | 2.5 ms | 2.0 ms | 1.25 | ratio <= 1.5 | met |" in page
    assert "| P1_p50 toolrun | 1.00 | 2.00 | 0.00 | 0.50 | 3.50 |" in page


def test_without_a_json_the_page_says_so(tmp_path):
    assert "No bench JSON" in benchmarks.render(benchmarks.MARKER, tmp_path)
