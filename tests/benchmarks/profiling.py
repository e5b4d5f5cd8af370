"""`python -m tests.benchmarks.profiling`: where toolrun's time goes, per call.

On the bench's stack (`harness.py`) it runs the P1, P3 and P4 workloads while
py-spy samples the client (this process: the dispatcher threads), the reads
worker and the effects worker with its prefork child, and prints, per process,
the milliseconds per call spent where toolrun's code calls into a library.
It also counts, for one batch of each workload, the Redis commands each process
sends (MONITOR, both sides) and the SQL statements and commits of the ledger on
the client and in the worker's task body, which it then runs here under
pyinstrument on real batches with Celery taken out. Everything lands in
`--out-dir` (default `.toolrun/profile-<timestamp>/`).
"""

from __future__ import annotations

import argparse
import functools
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from redis.connection import AbstractConnection
from rich.console import Console
from sqlalchemy import event
from sqlalchemy.engine import Engine

from runtime.keyspace.names import READS
from runtime.transport import outbox
from tests.benchmarks import figures, stacks
from tests.benchmarks.harness import Harness, harness
from tests.benchmarks.tools import NOOP, WRITE


@dataclass(frozen=True)
class Workload:
    size: int  # calls per batch
    toolrun: Callable[[figures.Sides, int], object]  # runs about n calls
    baseline: Callable[[figures.Sides, int], object]


WORKLOADS = {
    "P1": Workload(1, figures.p1_toolrun, figures.p1_baseline),
    "P3": Workload(
        10,
        lambda s, n: figures.p3_toolrun(s, n, 10, 16),
        lambda s, n: figures.p3_baseline(s, n, 10, 16),
    ),
    "P4": Workload(
        20,
        lambda s, n: [figures.p4_toolrun(s, 20) for _ in range(max(1, n // 20))],
        lambda s, n: [figures.p4_baseline(s, 20) for _ in range(max(1, n // 20))],
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.profiling", description=__doc__
    )
    parser.add_argument("--calls", type=int, default=600, help="calls per workload")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--idle", action="store_true", help="wall time: sample waiting threads too")
    parser.add_argument("--workloads", default="P1,P3,P4")
    parser.add_argument("--out-dir", type=Path)
    options = parser.parse_args(argv)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = options.out_dir or Path(".toolrun") / f"profile-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    console = Console(width=140)
    home = Path(tempfile.mkdtemp(prefix="toolrun-profile-"))
    with harness(home, 16, console) as bench:
        for name in filter(None, options.workloads.split(",")):
            WORKLOADS[name].toolrun(bench.sides, 100)  # warm-up: imports, pools, connections
            text = round_trips(bench, name) + sql_client(bench, name)
            text += sample(bench, name, options, out)
            (out / f"{name}.txt").write_text(text)
            console.print(text)
        text = worker_body(bench, options.calls, out)
        (out / "worker-body.txt").write_text(text)
        console.print(text)
    shutil.rmtree(home, ignore_errors=True)
    console.print(f"wrote {out}")
    return 0


def sample(bench: Harness, name: str, options: argparse.Namespace, out: Path) -> str:
    """py-spy on the client and both toolrun workers while the workload runs."""
    targets = {
        "client": (os.getpid(), False),
        "reads worker": (bench.worker_pid("toolrun", "reads"), True),
        "effects worker": (bench.worker_pid("toolrun", "effects"), True),
    }
    spies, files = [], {}
    for label, (pid, children) in targets.items():
        files[label] = out / f"{name}-{label.replace(' ', '-')}.raw"
        argv = [
            _py_spy(),
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            str(options.rate),
            "--nonblocking",
            "-o",
            str(files[label]),
        ]
        argv += ["--subprocesses"] * children + ["--idle"] * options.idle
        spies.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(1.0)  # py-spy attaches
    started = time.perf_counter()
    WORKLOADS[name].toolrun(bench.sides, options.calls)
    wall = time.perf_counter() - started
    for spy in spies:
        spy.send_signal(signal.SIGINT)
    for spy in spies:
        spy.wait(timeout=30)
    per_call = wall / options.calls * 1000
    kind = "wall: --idle" if options.idle else "CPU"
    text = f"# {name}: {options.calls} calls in {wall:.2f} s ({per_call:.2f} ms/call); {kind}\n\n"
    for label, path in files.items():
        found = stacks.load(path, rate=options.rate, calls=options.calls, only_ours=options.idle)
        text += stacks.report(f"{name} {label}", found) + "\n"
    return text


def _py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"  # the venv's, when it is not on PATH
    return str(beside) if beside.exists() else shutil.which("py-spy") or "py-spy"


def round_trips(bench: Harness, name: str) -> str:
    """Redis commands of one batch of the workload, by process and command, both sides."""
    workload, size = WORKLOADS[name], WORKLOADS[name].size
    text = f"# {name}: Redis commands for one batch of {size} call(s)\n"
    for side in ("toolrun", "baseline"):
        owners = {
            "client": [os.getpid()],
            "reads worker": [bench.worker_pid(side, "reads")],
            "effects worker": _family(bench.worker_pid(side, "effects")),
        }
        work = getattr(workload, side)
        seen = _monitor(bench, functools.partial(work, bench.sides, size))
        ports = _ports(owners)
        by_owner: dict[str, Counter] = {}
        for port, command in seen:
            by_owner.setdefault(ports.get(port, "other"), Counter())[command] += 1
        total = sum(sum(counter.values()) for counter in by_owner.values())
        text += f"{side}: {total} commands, {total / size:.1f} per call\n"
        for owner, counter in sorted(by_owner.items()):
            listed = ", ".join(f"{cmd} {n}" for cmd, n in counter.most_common())
            text += f"  {owner}: {sum(counter.values())}: {listed}\n"
    return text + "\n"


def _monitor(bench: Harness, work: Callable[[], object]) -> list[tuple[int, str]]:
    """(client port, command) of everything Redis ran while `work` ran (and 0.3 s after)."""
    seen: list[tuple[int, str]] = []
    stop = f"bench-monitor-stop-{time.time_ns()}"
    client = bench.runtime.deployment.client

    def listen(monitor) -> None:
        while True:
            command = monitor.next_command()
            if stop in command["command"]:
                return
            seen.append((int(command["client_port"] or 0), command["command"].split()[0].upper()))

    with client.monitor() as monitor:
        reader = threading.Thread(target=listen, args=(monitor,), daemon=True)
        reader.start()
        time.sleep(0.2)
        work()
        time.sleep(0.3)
        client.echo(stop)
        reader.join(timeout=10)
    return seen


def _family(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [pid, *(int(c) for c in children.read_text().split())] if children.exists() else [pid]


def _ports(owners: dict[str, list[int]]) -> dict[int, str]:
    """Local TCP port -> the owner whose process holds that socket (from /proc)."""
    inodes: dict[str, str] = {}
    for owner, pids in owners.items():
        for pid in pids:
            for fd in Path(f"/proc/{pid}/fd").glob("*"):
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = owner
    ports = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports[int(fields[1].rsplit(":", 1)[1], 16)] = inodes[fields[9]]
    return ports


def sql_client(bench: Harness, name: str) -> str:
    workload = WORKLOADS[name]
    with _sql_counted() as counted:
        workload.toolrun(bench.sides, 10 * workload.size)
    per = {kind: n / (10 * workload.size) for kind, n in counted.items()}
    listed = ", ".join(f"{kind} {n:.2f}" for kind, n in sorted(per.items()))
    return f"# {name}: ledger on the client, per call: {listed}\n\n"


class _sql_counted:
    """Count this process's SQL statements (by verb; BEGIN: transactions) and
    commits, and its Redis round trips (a pipeline is one: `redis` in the counter)."""

    def __enter__(self) -> Counter:
        self.counter: Counter = Counter()
        event.listen(Engine, "before_cursor_execute", self._statement)
        event.listen(Engine, "commit", self._commit)
        self._send = AbstractConnection.send_packed_command
        counter, send = self.counter, self._send

        def counted(connection, command, check_health=True):
            counter["redis"] += 1
            return send(connection, command, check_health)

        AbstractConnection.send_packed_command = counted
        return self.counter

    def __exit__(self, *_: object) -> None:
        AbstractConnection.send_packed_command = self._send
        event.remove(Engine, "before_cursor_execute", self._statement)
        event.remove(Engine, "commit", self._commit)

    def _statement(self, conn, cursor, statement, *_: object) -> None:
        self.counter[statement.split(None, 1)[0].upper()] += 1

    def _commit(self, conn) -> None:
        self.counter["commit()"] += 1


riding = outbox.CeleryQueue.ride


def worker_body(bench: Harness, calls: int, out: Path) -> str:
    """Real batches with Celery taken out: the client's messages come to this
    thread, which runs the task body (`workers.tasks.execute_call`) on each, so
    pyinstrument sees every line of the worker's side and nothing of Celery's."""
    from pyinstrument import Profiler

    task, inbox = _task_module(bench), queue.Queue()
    app = bench.runtime.deployment.app
    app.send_task = lambda name, args=None, **options: inbox.put(args[0])

    def ride(self, pipe, messages) -> None:  # a fresh batch's reads ride the marks' round trip
        for message in messages:
            inbox.put(outbox.task_options(message, READS, self.redactor)["args"][0])

    outbox.CeleryQueue.ride = ride
    kinds = {
        "reads": ([NOOP], None),
        "effects": ([WRITE] * 20, figures.WRITES),
        "staged": ([NOOP, WRITE, NOOP], figures.WRITES),  # three stages: two boundaries
    }
    text = "# the worker's task body in this process, Celery taken out, per call\n"
    text += "# (redis: round trips of client and worker body; BEGIN: ledger transactions)\n"
    try:
        for label, (tools, rules) in kinds.items():
            size = len(tools)
            batches = max(1, calls // size)
            drive = functools.partial(_drive, bench, task, inbox, tools, rules)
            drive(3)
            with _sql_counted() as counted:
                started = time.perf_counter()
                drive(batches)
                spent = (time.perf_counter() - started) / (batches * size) * 1000
            sql = ", ".join(f"{k} {n / (batches * size):.2f}" for k, n in sorted(counted.items()))
            text += f"{label} ({size}-call batches): {spent:.2f} ms/call wall, "
            text += f"SQL per call (client and worker): {sql}\n"
            profiler = Profiler(interval=0.0005)
            with profiler:
                drive(batches)
            path = out / f"worker-body-{label}.txt"
            path.write_text(profiler.output_text(unicode=False, color=False))
            text += f"  pyinstrument tree of the worker's side: {path}\n"
    finally:
        del app.send_task
        outbox.CeleryQueue.ride = riding
    return text + "\n"


def _drive(bench, task, inbox: queue.Queue, tools: list[str], rules, count: int) -> None:
    """`count` batches of `tools`' calls, each call's message run here as the
    worker would run it."""
    calls = [{"id": f"c{i}", "name": tool, "arguments": {}} for i, tool in enumerate(tools)]
    for _ in range(count):
        handle = figures.submit(bench.sides, calls, rules=rules)
        while not handle.done:
            try:
                task.execute_call.run(inbox.get(timeout=0.001))
            except queue.Empty:
                pass
        figures.check(handle.results(timeout=figures.WAIT), "worker body")


def _task_module(bench: Harness):
    """workers.tasks, imported here with the stack's settings (it reads them at import)."""
    import importlib

    from runtime.settings import get_settings

    settings = bench.runtime.settings
    os.environ.update(
        {
            "TOOLRUN_HOME": str(settings.home),
            "TOOLRUN_REDIS_URL": bench.record.redis_url,
            "TOOLRUN_DATABASE_URL": bench.record.database_url,
            "TOOLRUN_TOOL_MODULES": settings.tool_modules,
        }
    )
    get_settings.cache_clear()
    return importlib.import_module("workers.tasks")


if __name__ == "__main__":
    raise SystemExit(main())
