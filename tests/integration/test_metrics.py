"""The operators' figures (docs/architecture.md, "Traces and metrics") as
Prometheus scrapes them from `toolrun metrics`, on the session's stack: calls
running and waiting per queue while held calls keep the slots busy, approvals
pending, then calls by tool and status and their run times once they end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import TEST_TOOLS
from tests.support.tools import held_running, release
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
ALLOW = {"allow": ["held_write", "held"]}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture
def exporter(stack, user_settings):
    """`toolrun metrics` on a free port, and its URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
    env |= {
        "TOOLRUN_HOME": str(stack.home),
        "TOOLRUN_REDIS_URL": stack.redis_url,
        "TOOLRUN_DATABASE_URL": stack.database_url,
        "TOOLRUN_TOOL_MODULES": TEST_TOOLS,
        "TOOLRUN_USER_SETTINGS_FILE": str(user_settings),
        "PYTHONPATH": str(REPO),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "metrics", "--port", "0"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("metrics at "), line
        yield line.removeprefix("metrics at ")
    finally:
        process.terminate()
        process.wait(timeout=10)


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """Every sample: (name, sorted labels) -> value."""
    text = httpx.get(url, timeout=10).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def figure(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def figures_when(url: str, condition, timeout: float = 30.0, what: str = "figures"):
    """The exporter's figures, scraped until `condition` holds of them."""

    def met():
        samples = scrape(url)
        return samples if condition(samples) else None

    return wait_for(met, timeout, what, every=0.1)


def test_the_figures_an_autoscaler_reads(runtime, exporter, workspace):
    before = scrape(exporter)
    assert figure(before, "toolrun_cluster_up", store="redis") == 1
    assert figure(before, "toolrun_cluster_up", store="ledger") == 1
    submit = {"mode": "accept_edits", "workspace": workspace, "rules": ALLOW}
    # The effects worker has one slot: the first held write runs, the second waits.
    writes = [runtime.submit([call(c, "held_write", label=c)], **submit) for c in ("a", "b")]
    read = runtime.submit([call("r", "held", label="r")], **submit)
    asking = runtime.submit([call("ask", "bump", label="x")], mode="default", workspace=workspace)
    held_running(workspace, 2)  # one write and the read

    def busy(samples) -> bool:
        return (
            figure(samples, "toolrun_calls_running", queue="effects") >= 1
            and figure(samples, "toolrun_calls_running", queue="reads") >= 1
            and figure(samples, "toolrun_calls_waiting", queue="effects") >= 1
            and figure(samples, "toolrun_approvals_pending")
            >= figure(before, "toolrun_approvals_pending") + 1
        )

    figures_when(exporter, busy, what="calls running, waiting and asking")
    for label in ("a", "b", "r"):
        release(workspace, label)
    for handle in [*writes, read]:
        assert [r.status.value for r in handle.results(timeout=60)] == ["ok"]
    runtime.cancel(asking.batch_id)

    def ended(samples) -> bool:
        return (
            figure(samples, "toolrun_calls_total", tool="held_write", status="ok")
            == figure(before, "toolrun_calls_total", tool="held_write", status="ok") + 2
            and figure(samples, "toolrun_calls_total", tool="held", status="ok")
            == figure(before, "toolrun_calls_total", tool="held", status="ok") + 1
        )

    after = figures_when(exporter, ended, what="the ends counted")
    ran = figure(after, "toolrun_call_seconds_count", tool="held_write")
    assert ran == figure(before, "toolrun_call_seconds_count", tool="held_write") + 2
    assert figure(after, "toolrun_call_seconds_bucket", tool="held_write", le="+Inf") == ran
    assert figure(after, "toolrun_call_seconds_sum", tool="held_write") > 0
