"""G1 and G2: the HTTP gateway against the Python client it wraps, on the
bench's stack (docs/architecture.md, "The HTTP gateway"). The gateway is a
process of its own (`toolrun serve`), reached over loopback HTTP with a
submitter key; the baseline is `Runtime.submit` in this process.

G1: a 1-call no-op batch, submit to its result (POST, then a long poll);
beside it, in the same rounds, the same batch in one request (`POST
/v1/batches?wait=`), the other loop the gateway documents: its p50, ratio and
CPU are in G1's `one_request` (docs/benchmarks/index.md, "Where the
difference is").
G2: no-op reads through the gateway, batches of `p3_batch`, `p3_window` in
flight from one thread, as P3 runs them through the Python client.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from runtime.gateway.keys import Role, mint
from runtime.ledger.keys import Keys
from runtime.stack.gateway import needles, start_gateway
from runtime.stack.processes import stop_process
from tests.benchmarks import cpu, figures
from tests.benchmarks.compare import repeated
from tests.benchmarks.report import Figure, Target
from tests.benchmarks.tools import NOOP

WAIT = 60  # seconds of each long poll


@contextmanager
def client(bench) -> Iterator[httpx.Client]:
    """A gateway on the bench's stack and a keep-alive client holding a submitter
    key; the gateway's process id is the client's `gateway_pid`."""
    settings, runtime = bench.settings, bench.runtime
    env = bench.client_env()
    running = start_gateway(settings, env=env, timeout=60)
    token = mint(
        Keys(runtime.ledger),
        f"bench-{time.time_ns()}",
        Role.submitter,
        roots=[str(bench.sides.workspace)],
    )
    try:
        with httpx.Client(
            base_url=running["url"], timeout=WAIT + 30, headers={"Authorization": f"Bearer {token}"}
        ) as http:
            http.gateway_pid = running["pid"]
            yield http
    finally:
        stop_process(running["pid"], needles=needles(running))


def _start(http: httpx.Client, workspace, size: int) -> str:
    body = {"calls": figures.make_calls(NOOP, size), "mode": "auto", "workspace": str(workspace)}
    response = http.post("/v1/batches", json=body)
    response.raise_for_status()
    return response.json()["batch_id"]


def _finish(http: httpx.Client, batch_id: str, figure: str) -> None:
    state = http.get(f"/v1/batches/{batch_id}", params={"wait": WAIT}).json()
    bad = [r for r in state["results"] if r["status"] != "ok"]
    if state["state"] != "ended" or bad:
        raise figures.BenchError(f"{figure}: the gateway answered {state}")


def g1(http: httpx.Client, workspace, samples: int) -> list[float]:
    def one() -> float:
        began = time.perf_counter()
        _finish(http, _start(http, workspace, 1), "G1")
        return time.perf_counter() - began

    return [one() for _ in range(samples)]


def g1_one_request(http: httpx.Client, workspace, samples: int) -> list[float]:
    """G1's batch submitted with `?wait=`: its results in the POST's answer."""
    body = {"calls": figures.make_calls(NOOP, 1), "mode": "auto", "workspace": str(workspace)}

    def one() -> float:
        began = time.perf_counter()
        state = http.post("/v1/batches", json=body, params={"wait": WAIT}).json()
        took = time.perf_counter() - began
        if state.get("state") != "ended" or state["results"][0]["status"] != "ok":
            raise figures.BenchError(f"G1 (one request): the gateway answered {state}")
        return took

    return [one() for _ in range(samples)]


def g2(http: httpx.Client, workspace, calls: int, size: int, window: int) -> float:
    began = time.perf_counter()
    figures._pump(
        calls,
        size,
        window,
        lambda: _start(http, workspace, size),
        lambda batch_id: _finish(http, batch_id, "G2"),
    )
    return figures.batches(calls, size) * size / (time.perf_counter() - began)


def measure(options: argparse.Namespace, bench, console, *, only_g1: bool = False) -> list[Figure]:
    """G1 and G2 (`only_g1`: `--only G1`, the latency alone)."""
    sides, o = bench.sides, options
    with client(bench) as http:
        console.log(f"G1: {o.g1_samples} one-call batches over HTTP x {o.repeats}")
        meter = cpu.Meter({"gateway": http.gateway_pid})
        single: list[list[float]] = []

        def baseline_then_one_request() -> list[float]:
            found = figures.p1_toolrun(sides, o.g1_samples)
            single.append(
                meter.measure(
                    "one_request",
                    o.g1_samples,
                    lambda: g1_one_request(http, sides.workspace, o.g1_samples),
                )
            )
            return found

        ours, theirs = repeated(
            lambda: meter.measure(
                "toolrun", o.g1_samples, lambda: g1(http, sides.workspace, o.g1_samples)
            ),
            baseline_then_one_request,
            o.repeats,
        )
        p50 = lambda runs: [round(figures.percentile(r, 0.5) * 1000, 3) for r in runs]  # noqa: E731
        latency = Figure(
            "G1",
            "1-call batch over HTTP, p50",
            "ms",
            Target("ratio", "<=", 1.2),
            p50(ours),
            p50(theirs),
            note="POST /v1/batches, then GET ?wait=; baseline: Runtime.submit(...).results()",
        )
        # CPU per batch (its POST and its long poll), the warm-up's included: the
        # gateway's, and this process's (the HTTP client's) beside it.
        spent = meter.per_call_ms()
        latency.extra["cpu_ms_per_batch"] = spent["toolrun"]
        single_p50 = p50(single[1:])  # the first is the warm-up's
        ratio = statistics.median(single_p50) / statistics.median(latency.baseline)
        latency.extra["one_request"] = {
            "p50_ms": single_p50,
            "ratio": round(ratio, 3),
            "cpu_ms_per_batch": spent["one_request"],
            "note": "POST /v1/batches?wait=, in the same rounds",
        }
        for name, side in (("POST, GET ?wait=", "toolrun"), ("POST ?wait=", "one_request")):
            console.log(
                f"G1 {name}: CPU per batch, gateway {spent[side].get('gateway', 0):.2f} ms, "
                f"HTTP client {spent[side].get('client', 0):.2f} ms"
            )
        median = statistics.median(single_p50)
        console.log(f"G1 POST ?wait=: p50 {median:.2f} ms, ratio {ratio:.2f}")
        if only_g1:
            return [latency]
        console.log(f"G2: {o.g2_calls} no-op reads through the gateway x {o.repeats}")
        ours, theirs = repeated(
            lambda: g2(http, sides.workspace, o.g2_calls, o.p3_batch, o.p3_window),
            lambda: figures.p3_toolrun(sides, o.g2_calls, o.p3_batch, o.p3_window),
            o.repeats,
        )
        throughput = Figure(
            "G2",
            f"calls/s through the gateway, batches of {o.p3_batch}",
            "calls/s",
            Target("ratio", ">=", 0.5),
            ours,
            theirs,
            note=f"{o.p3_window} batches in flight from one thread; baseline: the Python client",
        )
    return [latency, throughput]
