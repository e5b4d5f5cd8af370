"""P7: what one client process pays for each batch it follows.

`python -m tests.benchmarks.open_batches --batches 5000` starts a stack of its
own (or uses `--redis-url` and `--database-url`, as `make bench` does), builds
one `Runtime`, and submits `--batches` one-call batches whose call waits for an
approval. Once every handle has shown its notice, it reads the process's
threads (the kernel's count, every thread included), its resident memory and
its TCP connections to Redis; then it denies every call, waits until every
batch has ended, and prints one JSON object on its last line.

It runs in a process of its own so that nothing else (the bench's own client,
its baseline) is counted (docs/architecture.md, "Following batches").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from runtime.client import Runtime
from runtime.settings import Settings
from tests.benchmarks.report import Figure, Target
from tests.benchmarks.tools import MODULE, NOOP, WRITE

WAIT = 600.0  # seconds the run waits for every notice, then for every end


def proc_status(field: str, pid: str = "self") -> int:
    """A number from /proc/<pid>/status (`Threads`, `VmRSS` in KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def redis_sockets(port: int, pid: str = "self") -> int:
    """TCP connections this process holds to `port` (Redis): its sockets'
    inodes matched against the kernel's TCP tables."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            found += remote_port == port and fields[9] in inodes
    return found


def sample(port: int) -> dict[str, int]:
    return {
        "threads": proc_status("Threads"),
        "rss_kib": proc_status("VmRSS"),
        "redis_connections": redis_sockets(port),
    }


def _until(done, seconds: float) -> bool:
    """Whether `done()` came true within `seconds`."""
    limit = time.monotonic() + seconds
    while not done():
        if time.monotonic() > limit:
            return False
        time.sleep(0.2)
    return True


def measure(runtime: Runtime, workspace: Path, batches: int) -> dict[str, Any]:
    """Open `batches` one-call batches waiting for approval; what they cost."""
    port = int(runtime.deployment.redis_url.rsplit(":", 1)[1].split("/")[0])
    runtime.submit(
        [{"id": "warm", "name": NOOP, "arguments": {}}], mode="auto", workspace=workspace
    ).results(timeout=60)
    before = sample(port)
    began = time.monotonic()
    handles = waiting(runtime, workspace, batches)
    submitted = time.monotonic() - began
    _until(lambda: all(h.so_far()[1] for h in handles), WAIT)
    noticed = sum(bool(h.so_far()[1]) for h in handles)
    opened = [sample(port) for _ in range(5) if not time.sleep(0.2)]
    peak = {key: max(s[key] for s in opened) for key in before}
    began = time.monotonic()
    for handle in handles:
        handle.deny("w", "P7 is over", by="bench")
    _until(lambda: all(h.done for h in handles), WAIT)
    answered = time.monotonic() - began
    ended = sum(h.done and h.results()[0].status.value == "denied" for h in handles)
    after = sample(port)
    return {
        "noticed": noticed,
        "batches": batches,
        "before": before,
        "open": peak,
        "after": after,
        "threads_per_batch": (peak["threads"] - before["threads"]) / batches,
        "rss_kib_per_batch": (peak["rss_kib"] - before["rss_kib"]) / batches,
        "submit_s": round(submitted, 2),
        "deny_and_end_s": round(answered, 2),
        "denied": ended,
    }


def figures(options: argparse.Namespace, bench, console: Console) -> list[Figure]:
    """P7 on the bench's stack, in a client process of its own: every thread of
    that process while it follows the open batches (at most 8 is the target),
    and the resident memory each open batch costs. One reading: its size, not
    repetitions, is the point."""
    batches = options.p7_batches
    console.log(f"P7: {batches:,} one-call batches waiting for approval in one client process")
    command = [
        sys.executable,
        "-m",
        "tests.benchmarks.open_batches",
        "--batches",
        str(batches),
        "--redis-url",
        bench.record.redis_url,
        "--database-url",
        bench.record.database_url,
        "--home",
        str(bench.settings.home),
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=2 * WAIT + 600
    )
    if done.returncode != 0:
        raise RuntimeError(f"P7's client failed: {done.stderr[-3000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    before, opened = found["before"], found["open"]
    extra = {"p7": found}
    note = (
        f"{found['threads_per_batch']:.4f} threads per open batch "
        f"({before['threads']} threads after a first batch), "
        f"{opened['redis_connections']} connections to Redis "
        f"({before['redis_connections']} before); every batch then denied and "
        f"ended: {found['denied']:,}"
    )
    return [
        Figure(
            "P7_threads",
            f"threads of one client following {batches:,} open batches",
            "threads",
            Target("toolrun", "<=", 8),
            [float(opened["threads"])],
            note=note,
            extra=extra,
        ),
        Figure(
            "P7_rss",
            "resident memory per open batch, one client",
            "KiB",
            Target("toolrun", "<=", 64),
            [round(found["rss_kib_per_batch"], 2)],
            note="VmRSS with every batch open minus before the first, over the batches",
            extra=extra,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.open_batches",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--batches", type=int, default=5000)
    parser.add_argument("--redis-url")
    parser.add_argument("--database-url")
    parser.add_argument("--home", type=Path)
    options = parser.parse_args(argv)
    stack_home = None
    if options.redis_url is None:
        from runtime.stack.embedded import start_stack

        stack_home = Path(tempfile.mkdtemp(prefix="toolrun-p7-"))
        own = Settings(home=stack_home, redis_url=None, database_url=None, tool_modules=MODULE)
        record = start_stack(own, flower=False)
        options.redis_url, options.database_url = record.redis_url, record.database_url
        options.home = stack_home
    home = options.home or Path(tempfile.mkdtemp(prefix="toolrun-p7-"))
    workspace = home / "p7-workspace"
    workspace.mkdir(exist_ok=True)
    user = home / "p7-user.json"
    user.write_text(json.dumps({"trusted_workspaces": [str(workspace)]}))
    settings = Settings(
        home=home,
        redis_url=options.redis_url,
        database_url=options.database_url,
        tool_modules=MODULE,
        user_settings_file=user,
    )
    runtime = Runtime(settings)
    try:
        found = measure(runtime, workspace, options.batches)
    finally:
        runtime.close()
        if stack_home is not None:
            from runtime.stack.embedded import stop_stack

            stop_stack(stack_home)
    print(json.dumps(found), flush=True)
    return 0


def waiting(runtime: Any, workspace: Path, count: int) -> list:
    """`count` one-write batches that wait for an approval (an hour's deadline)."""
    return [
        runtime.submit(
            [{"id": "w", "name": WRITE, "arguments": {}}],
            mode="default",
            workspace=workspace,
            timeout=3600,
        )
        for _ in range(count)
    ]


if __name__ == "__main__":
    sys.exit(main())
