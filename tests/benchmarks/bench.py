"""`python -m tests.benchmarks.bench` (`make bench`): toolrun against bare Celery.

One embedded stack: a private redis-server, toolrun's reads and effects workers
(ledger on, SQLite) and bare Celery workers for `baseline.py` on queues of their
own, with the same pools and concurrency (reads: prefork, `--reads-slots`
processes; effects: prefork, concurrency 1). Each figure is the median of
`--repeats` repetitions after a warm-up, the sides taking turns. It prints a
table, writes every repetition to `<out-dir>/bench-<timestamp>.json`, and
exits 0 whether or not targets are met: it reports, it does not judge. Sizes
come from flags, else `BENCH_<FLAG>` variables (`BENCH_QUICK=1`,
`BENCH_REPEATS=3`), else the issue's sizes.

F1 and L1 (`limits.py`) are flow control's: fair share, and the CPU the
limits' checks add per call (`--only F1`, `--only L1`). I1 (`startup.py`) is how
long a fresh process takes to import the client, and to run `toolrun --help`.
S1 (`sandbox.py`) is what the sandbox adds to a one-call shell batch, against the
same batch unconfined (`--only S1`). P8, P9 and P10 (`growth.py`) are how the
cost grows: P1 on a ledger of a million ended calls, a 1,000-call batch against
a Celery group, P1 with 5,000 batches open; each against its own small case
(`--only P8`, with `--ledger` for PostgreSQL).

P7 (`open_batches.py`) is toolrun alone: one client process with 5,000 batches
waiting for approval, its threads and memory. `--only P7` measures it alone
(`make bench BENCH_FLAGS="--only P7"`); `--only P1`, `P2`, `P3`, `P4`, `P5`, `P6`
and `G1` each measure that figure alone, both sides (the machine's load makes them noisy:
say it next to them). M1 (`mcp_face.py`): a 1-call batch through `toolrun mcp serve`
against the Python client (`--only M1`). A1 (`agents_turn.py`): a turn of four
reads through the OpenAI Agents SDK's function tools, four one-call batches,
against the four as one batch (`--only A1`). `--trace` turns OpenTelemetry on in the
client and the workers, exporting to an OTLP/HTTP receiver in this process
(tracing's cost: `--only P1` with and without it).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import celery
from rich.console import Console

from tests.benchmarks import (
    agents_turn,
    baseline,
    compare,
    cpu,
    gateway,
    growth,
    limits,
    mcp_face,
    open_batches,
    redaction_time,
    report,
    sandbox,
    startup,
)
from tests.benchmarks.harness import harness
from tests.benchmarks.report import Figure
from tests.support import otlp

# What `--only` measures without the rest.
ALONE_FIGURES = (
    *("P1", "P2", "P3", "P4", "P5", "P6", "G1", "M1", "P7", "F1", "L1", "I1", "S1", "A1"),
    *("P8", "P9", "P10"),
)
SIZES: dict[str, tuple[Any, Any, str]] = {  # name: (full, --quick, help)
    "repeats": (5, 2, "repetitions of each figure, after one warm-up"),
    "reads_slots": (16, 4, "pool processes of each reads worker, both sides"),
    "p1_samples": (100, 5, "P1: one-call batches per repetition"),
    "p2_calls": (16, 4, "P2: sleeping reads in the batch"),
    "p2_sleep": (0.2, 0.05, "P2: seconds each read sleeps"),
    "p3_calls": (2000, 40, "P3: no-op reads per repetition"),
    "p3_repeats": (3, 2, "P3: repetitions (the longest figure), after one warm-up"),
    "p3_batch": (10, 10, "P3: reads per batch"),
    "p3_window": (16, 2, "P3: batches in flight at once, from one thread"),
    "p4_steps": (20, 5, "P4: ordered no-op writes in the batch"),
    "p5_calls": (64, 16, "P5: sleeping reads in the batch (more than one worker's slots)"),
    "p5_sleep": (0.1, 0.05, "P5: seconds each read sleeps"),
    "p6_calls": (10_000, 200, "P6: calls each reads worker has run when its PSS is read"),
    "g1_samples": (100, 5, "G1: one-call batches over HTTP per repetition"),
    "g2_calls": (1000, 40, "G2: no-op reads through the gateway per repetition"),
    "m1_samples": (100, 5, "M1: one-call batches through the MCP face per repetition"),
    "a1_samples": (50, 3, "A1: turns of four reads through the Agents SDK per repetition"),
    "r1_samples": (200, 20, "R1: redactions of a 32 KiB result per repetition (in-process)"),
    "p7_batches": (5000, 50, "P7: one-call batches waiting for approval in one client process"),
    "f1_flood": (2000, 100, "F1: key A's no-op reads queued while key B's batch is timed"),
    "f1_samples": (15, 2, "F1: key B's one-call batches per repetition (their median)"),
    "l1_calls": (1000, 20, "L1: one-call batches the checks alone are measured over (limits_cost)"),
    "f1_share": (4, 2, "F1: fair share's reads in flight per key"),
    "i1_samples": (10, 2, "I1: fresh processes started per repetition (their median)"),
    "s1_samples": (50, 5, "S1: one-call shell batches per repetition, each side"),
    "p8_calls": (1_000_000, 2000, "P8: ended calls bulk-loaded into the ledger"),
    "p9_calls": (1000, 50, "P9: no-op reads in the one batch (and in the group)"),
    "p10_batches": (5000, 20, "P10: batches left open, waiting for approval"),
}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test's)")
    parser.add_argument("--out-dir", type=Path, help="where the JSON goes (default .toolrun)")
    parser.add_argument("--keep", action="store_true", help="keep the stack's home (logs, ledger)")
    parser.add_argument(
        "--only", choices=ALONE_FIGURES, help="measure this figure alone (with its baseline)"
    )
    parser.add_argument(
        "--broker",
        help="Celery's broker for both sides, e.g. amqp://guest:guest@127.0.0.1:5672// "
        "(default: the stack's Redis); measures P1 to P4 only",
    )
    parser.add_argument(
        "--ledger",
        help="toolrun's ledger, e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test: a "
        "database of the bench's own is made on that server and dropped afterwards "
        "(default: SQLite under the stack's home)",
    )
    parser.add_argument(
        "--trace", action="store_true", help="traces on, to an OTLP receiver in this process"
    )
    for name, (full, _, text) in SIZES.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=type(full), help=f"{text} (default {full})")
    options = parser.parse_args(argv)
    options.quick = options.quick or os.environ.get("BENCH_QUICK", "") not in ("", "0")
    options.out_dir = options.out_dir or Path(os.environ.get("BENCH_OUT_DIR", ".toolrun"))
    for name, (full, quick, _) in SIZES.items():
        if getattr(options, name) is None:
            raw = os.environ.get(f"BENCH_{name.upper()}")
            setattr(options, name, type(full)(raw) if raw else quick if options.quick else full)
    if options.p5_calls <= options.reads_slots:
        parser.error("--p5-calls must exceed --reads-slots, or one worker takes them all at once")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    console = Console(width=None if sys.stdout.isatty() else 120)
    home = Path(tempfile.mkdtemp(prefix="toolrun-bench-"))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    began = time.monotonic()
    try:
        found, meta = run(options, home, console)
    except BaseException:
        console.print(f"[red]the benchmark stopped[/]; logs and ledger kept under {home}")
        raise
    if not options.keep:
        shutil.rmtree(home, ignore_errors=True)
    meta |= {"started_at": stamp, "duration_s": round(time.monotonic() - began, 1)}
    path = report.write_json(options.out_dir / f"bench-{stamp}.json", found, meta)
    report.print_table(console, found, meta["caption"])
    report.print_cpu(console, found)
    console.print(f"wrote {path}", soft_wrap=True)
    return 0


def run(options: argparse.Namespace, home: Path, console: Console) -> tuple[list[Figure], dict]:
    slots = options.reads_slots
    with (
        tracing(options, console) as otel,
        broker(options.broker) as broker_url,
        ledger(options.ledger) as ledger_url,
        harness(home, slots, console, otel.env, broker_url, ledger_url) as bench,
    ):
        if options.only:
            return alone(options, bench, console), _meta(options, bench, otel)
        found = compare.measure(options, bench.sides, console, bench.processes())
        if options.broker:  # the broker's own figures: P1 to P4
            return found, _meta(options, bench, otel)
        found.append(compare.memory(options, bench, console))
        found.insert(-1, compare.scaling(options, bench.sides, bench.add_reads_workers, console))
        console.log(f"R1: a 32 KiB result redacted {options.r1_samples} times x {options.repeats}")
        found.append(redaction_time.figure(options))
        found += gateway.measure(options, bench, console)
        found.append(mcp_face.measure(options, bench, console))
        found.append(agents_turn.measure(options, bench, console))
        found += open_batches.figures(options, bench, console)
        found += [limits.f1(options, bench, console), *limits.l1(options, bench, console)]
        console.log("I1: fresh processes importing the client and running toolrun --help")
        found += startup.figures(options)
        found.append(sandbox.s1(options, bench, console))
        found += growth.p9(options, bench, console)
        found.append(growth.p10(options, bench, console))
        found += growth.p8(options, bench, console)  # last: its ledger grows, then is pruned
        return found, _meta(options, bench, otel)


def alone(options: argparse.Namespace, bench, console: Console) -> list[Figure]:
    """`--only`: one figure without the rest of the suite (its CPU per call
    where the full run measures it)."""
    if options.only in ("P8", "P9", "P10"):
        made = getattr(growth, options.only.lower())(options, bench, console)
        return made if isinstance(made, list) else [made]
    if options.only == "P7":
        return open_batches.figures(options, bench, console)
    if options.only == "F1":
        return [limits.f1(options, bench, console)]
    if options.only == "L1":
        return limits.l1(options, bench, console)
    if options.only == "I1":
        return startup.figures(options)
    if options.only == "S1":
        return [sandbox.s1(options, bench, console)]
    if options.only == "P6":
        return [compare.memory(options, bench, console)]
    if options.only == "P5":
        return [compare.scaling(options, bench.sides, bench.add_reads_workers, console)]
    if options.only == "G1":
        return gateway.measure(options, bench, console, only_g1=True)
    if options.only == "M1":
        return [mcp_face.measure(options, bench, console)]
    if options.only == "A1":
        return [agents_turn.measure(options, bench, console)]
    meter = cpu.Meter(bench.processes())
    if options.only == "P2":
        return [compare.p2(options, bench.sides, console, meter)]
    if options.only == "P3":
        found = [compare.p3(options, bench.sides, console, meter)]
    elif options.only == "P4":
        found = [compare.p4(options, bench.sides, console, meter)]
    else:
        found = compare.p1(options, bench.sides, console, meter)
    found[0].extra["cpu_ms_per_call"] = meter.per_call_ms()
    return found


@contextmanager
def broker(url: str | None) -> Iterator[str | None]:
    """`--broker`: RabbitMQ on a vhost of the bench's own, deleted afterwards
    (the machine's RabbitMQ keeps nothing of it); another broker as given."""
    if url is None or not url.startswith("amqp"):
        yield url
        return
    from tests.support.rabbitmq import own_vhost

    with own_vhost(url) as vhost_url:
        yield vhost_url


@contextmanager
def ledger(url: str | None) -> Iterator[str | None]:
    """`--ledger`: a PostgreSQL database of the bench's own on that server,
    dropped afterwards; None: SQLite under the stack's home."""
    if url is None:
        yield None
        return
    from tests.support.postgres import fresh_database

    with fresh_database(url) as database_url:
        yield database_url


@dataclass
class Tracing:
    env: dict[str, str] = field(default_factory=dict)  # the workers' OTEL_* (none: off)
    receiver: otlp.Receiver | None = None


@contextmanager
def tracing(options: argparse.Namespace, console: Console) -> Iterator[Tracing]:
    """With `--trace`, an OTLP/HTTP receiver here, and the client (this process)
    and workers exporting every span to it; else tracing stays off."""
    if not options.trace:
        yield Tracing()
        return
    server, receiver = otlp.serve()
    os.environ.update(otlp.environment(server, "toolrun-bench-client"))  # the Runtime's
    console.log(f"traces on: OTLP/HTTP receiver on 127.0.0.1:{server.server_port}")
    try:
        yield Tracing(otlp.environment(server, "toolrun-bench-worker"), receiver)
    finally:
        server.shutdown()
        server.server_close()


def _meta(options: argparse.Namespace, bench, otel: Tracing) -> dict[str, Any]:
    slots, ledger = options.reads_slots, _ledger_name(bench.record.database_url)
    pools = {
        "reads": f"prefork pool, {slots} processes per worker, 1 worker (2 in P5's second half)",
        "effects": "prefork pool, concurrency 1, 1 worker",
    }
    return {
        "pools": {
            f"{side} {queue}": pool
            for side in ("toolrun", "baseline")
            for queue, pool in pools.items()
        },
        "queues": {
            "toolrun": ["reads", "effects"],
            "baseline": [baseline.READS_QUEUE, baseline.EFFECTS_QUEUE],
        },
        "caption": f"both sides: reads = prefork, {slots} processes (1 worker, 2 in P5); "
        f"effects = prefork, concurrency 1; toolrun's ledger on ({ledger})"
        + (f"; broker {_shown(options.broker)} for both sides" if options.broker else "")
        + ("; toolrun's traces on (OTLP/HTTP, local receiver)" if otel.receiver else ""),
        "shared_celery_settings": bench.conf,
        "ledger": f"on: {ledger}, {_shown(bench.record.database_url)}, "
        "written by client and workers",
        "sizes": {name: getattr(options, name) for name in SIZES},
        "quick": options.quick,
        "tracing": (
            f"on: OTLP/HTTP to a receiver in the bench process ({len(otel.receiver.spans)} "
            "spans received)"
            if otel.receiver is not None
            else "off"
        ),
        "machine": machine(bench.runtime),
    }


def machine(runtime) -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "celery": celery.__version__,
        "redis_server": runtime.deployment.client.info("server").get("redis_version"),
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def _ledger_name(database_url: str) -> str:
    """The ledger the stack runs on, by its URL (not by the flags that asked for it)."""
    return "PostgreSQL" if database_url.startswith("postgresql") else "SQLite"


def _shown(url: str) -> str:
    """A broker's or ledger's URL without its password."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}" if "@" in rest else url


if __name__ == "__main__":
    raise SystemExit(main())
