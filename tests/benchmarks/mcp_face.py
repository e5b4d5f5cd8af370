"""M1: a 1-call batch through the MCP face against the same batch through the
Python client it wraps, on the bench's stack (docs/architecture.md,
"Integrations"). The face is `toolrun mcp serve` in a process of its own,
driven over stdio by the official MCP client through one session; the
baseline is `Runtime.submit(...).results()` in this process, in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.benchmarks import figures
from tests.benchmarks.compare import repeated
from tests.benchmarks.report import Figure, Target
from tests.benchmarks.tools import NOOP
from tests.support.cli import SCRIPT


@contextmanager
def session(bench) -> Iterator:
    """An MCP client session with `toolrun mcp serve` on the bench's stack, in
    `auto` mode on the bench's workspace, and a portal to call it from here."""
    env = bench.client_env()
    workspace = str(bench.sides.workspace)
    server = StdioServerParameters(
        command=SCRIPT or "toolrun",
        args=["mcp", "serve", "--mode", "auto", "--workspace", workspace],
        env=env,
        cwd=os.getcwd(),
    )
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(Client(stdio_client(server))) as client:
            yield portal, client


def m1(portal, client, samples: int) -> list[float]:
    def one() -> float:
        began = time.perf_counter()
        result = portal.call(client.call_tool, NOOP, {})
        took = time.perf_counter() - began
        if result.is_error:
            raise figures.BenchError(f"M1: the MCP face answered {result}")
        return took

    return [one() for _ in range(samples)]


def measure(options: argparse.Namespace, bench, console) -> Figure:
    o = options
    with session(bench) as (portal, client):
        console.log(f"M1: {o.m1_samples} one-call batches through the MCP face x {o.repeats}")
        ours, theirs = repeated(
            lambda: m1(portal, client, o.m1_samples),
            lambda: figures.p1_toolrun(bench.sides, o.m1_samples),
            o.repeats,
        )
    p50 = lambda runs: [round(figures.percentile(r, 0.5) * 1000, 3) for r in runs]  # noqa: E731
    return Figure(
        "M1",
        "1-call batch through the MCP face, p50",
        "ms",
        Target("ratio", "<=", 1.3),
        p50(ours),
        p50(theirs),
        note="tools/call over stdio to `toolrun mcp serve`; "
        "baseline: Runtime.submit(...).results()",
    )
