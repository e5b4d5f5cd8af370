"""A call's processes die with it (`runtime/sessions.py`): when the pool process
running a shell step is SIGKILLed from outside, killed at its hard limit, or
frozen with SIGSTOP until the hard limit kills it, the bash session it started
is gone before the call's end is recorded and before the next ordered step
starts. The next step looks for the first one's bash itself, so what it
writes is a fact of the moment it started.

A stack of its own with one effects slot and a long visibility timeout: the
call must be ended by the worker that lost its process, not by a redelivery.
Its workers run commands unconfined (`sandbox=False`): the steps read each other's
pids in the host's /proc, which a sandboxed command has its own of;
tests/integration/test_sandbox.py kills a pool process under a sandboxed command."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from runtime.stack.processes import log_tail
from runtime.types import Status
from tests.support.fault_tools import SHORT_SHELL_TIMEOUT
from tests.support.faults import FaultStack
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]
KILL_GRACE = 1.0
MCP_SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_server.py"
ALLOW = {"allow": ["shell", "short_shell", "stuck_shell", "held__hold"]}
FIRST = "echo $$ > first.pgid; sleep 30; echo done >> steps.log"
# Whether the first step's bash still runs (a zombie is dead), when this step starts.
SECOND = (
    "g=$(cat first.pgid); s=gone; "
    "if grep -qv ') Z ' /proc/$g/stat 2>/dev/null; then s=alive; fi; "
    'echo "first:$s" >> steps.log'
)


@pytest.fixture(scope="module")
def sessions_stack(tmp_path_factory, user_settings):
    home = tmp_path_factory.mktemp("sessions")
    servers = home / "servers.json"
    notes = {"command": [sys.executable, str(MCP_SERVER)], "trusted": True, "timeout": 60}
    servers.write_text(json.dumps({"servers": {"held": notes}}))
    slots = {"effects_concurrency": 1, "kill_grace": KILL_GRACE, "sandbox": False}
    stack = FaultStack(home, user_settings=user_settings, visibility_timeout=120, **slots)
    stack.settings = stack.settings.model_copy(update={"mcp_servers_file": servers})
    with stack, stack.client() as runtime:
        yield stack, runtime


def stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat(int(entry.name))):
            if fields[2] == str(pgid) and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def effects_log(stack) -> str:
    """What the effects worker said last: the story when a step does not start."""
    worker = stack.workers("effects")[0]
    return f"{worker['log']}:\n{log_tail(Path(worker['log']), lines=40)}"


def first_session(stack, workspace: Path) -> int:
    path = workspace / "first.pgid"
    try:
        return wait_for(lambda: path.exists() and path.read_text().strip(), what="first step")
    except AssertionError as error:
        raise AssertionError(f"{error}; the effects worker's log {effects_log(stack)}") from None


class Lost:
    """A batch whose first step's process is lost (`fault`) once its session
    runs; what the next step saw, and what is left of the session."""

    def __init__(self, stack, runtime, workspace: Path, request, batch, fault: str) -> None:
        self.handle = runtime.submit(
            batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=90
        )
        self.group = int(first_session(stack, workspace))
        self.pool = int(stat(self.group)[1])  # the session's parent: the pool process
        assert self.pool in stack.pool_processes(stack.workers("effects")[0])
        request.addfinalizer(self.leave_nothing)
        if fault == "sigkill":
            stack.kill_pool_process(self.pool)
        elif fault == "sigstop":
            started = (workspace / "first.pgid").stat().st_mtime
            os.kill(self.pool, signal.SIGSTOP)
            # Stopped before its own timeout could end the command: only the hard limit can.
            assert time.time() - started < SHORT_SHELL_TIMEOUT - 0.5, "stopped too late to tell"
        lost_at = time.monotonic()
        self.results = self.handle.results(timeout=90)
        self.took = time.monotonic() - lost_at
        steps = workspace / "steps.log"
        told = [(r.call_id, r.status, r.model_message) for r in self.results]
        assert steps.exists(), f"the second step never ran: {told}; {effects_log(stack)}"
        self.log = steps.read_text().split()
        events = runtime.ledger.events(self.handle.batch_id, "first")
        self.ends = [e for e in events if e.kind == "finished"]

    def leave_nothing(self) -> None:
        for pid in [self.pool, *group_members(self.group)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("fault", ["sigkill", "hard limit", "sigstop"])
def test_a_lost_pool_process_takes_its_shell_session_with_it(
    sessions_stack, workspace, request, fault
):
    stack, runtime = sessions_stack
    tool = {"sigkill": "shell", "hard limit": "stuck_shell", "sigstop": "short_shell"}[fault]
    batch = [
        {"id": "first", "name": tool, "arguments": {"command": FIRST}},
        {"id": "second", "name": "shell", "arguments": {"command": SECOND}},
    ]
    lost = Lost(stack, runtime, workspace, request, batch, fault)

    assert lost.log == ["first:gone"], lost.log  # the next step started after the bash was gone
    assert group_members(lost.group) == []  # and nothing of the session is left to write "done"
    first, second = lost.results
    assert first.status is Status.outcome_unknown, first.model_message
    if fault == "sigkill":
        # Its worker's main process ends it; until a claim is a lease, the
        # requeued copy may find the claim first and end it the same way.
        assert "running this call was lost" in first.model_message, first.model_message
        assert lost.took < 10, lost.took  # within seconds, not at the visibility timeout
    else:
        assert "the process running it was killed" in first.model_message
        assert first.error.kind == "killed"
    assert second.ok, second.model_message
    assert len(lost.ends) == 1, lost.ends


def test_a_lost_pool_process_takes_its_mcp_stdio_server_with_it(sessions_stack, workspace, request):
    stack, runtime = sessions_stack
    batch = [
        {"id": "first", "name": "held__hold", "arguments": {"seconds": 30, "name": "first"}},
        {"id": "second", "name": "shell", "arguments": {"command": SECOND}},
    ]
    lost = Lost(stack, runtime, workspace, request, batch, "sigkill")

    assert lost.log == ["first:gone"], lost.log
    assert group_members(lost.group) == []
    assert not (workspace / "notes" / "first.txt").exists()
    first, second = lost.results
    assert first.status is Status.outcome_unknown, first.model_message
    assert "running this call was lost" in first.model_message, first.model_message
    assert second.ok and len(lost.ends) == 1


def test_a_lost_workers_shell_session_dies_with_the_judgement_before_the_next_step(
    tmp_path, user_settings, workspace, request
):
    """Two effects workers and no supervisor: the one running the first step
    is SIGKILLed whole, its bash (a session of its own) left running. No
    worker starts again to clear it up; the lease lapses, the first step is
    judged lost and the second goes to the other worker, which must find the
    first's bash gone (docs/architecture.md, "Leases")."""
    batch = [
        {"id": "first", "name": "shell", "arguments": {"command": FIRST}},
        {"id": "second", "name": "shell", "arguments": {"command": SECOND}},
    ]
    # Unconfined, as the module's other stacks: the steps read each other's host pids
    # (a sandboxed bash is pid 1 of its own namespace, and dies with its pool process).
    slots = {"effects_workers": 2, "effects_concurrency": 1, "kill_grace": KILL_GRACE}
    slots["sandbox"] = False
    with (
        FaultStack(
            tmp_path / "home",
            user_settings=user_settings,
            visibility_timeout=3600,
            lease_seconds=3.0,
            **slots,
        ) as stack,
        stack.client() as runtime,
    ):
        handle = runtime.submit(
            batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=90
        )
        group = int(first_session(stack, workspace))
        request.addfinalizer(lambda: [os.kill(p, signal.SIGKILL) for p in group_members(group)])
        pool = int(stat(group)[1])
        [running] = [w for w in stack.workers("effects") if pool in stack.pool_processes(w)]
        stack.kill_worker(running)
        assert group_members(group), "the bash went with its worker: nothing to judge"

        first, second = handle.results(timeout=60)
        log = (workspace / "steps.log").read_text().split()
    assert log == ["first:gone"], log  # the second step started after the bash was gone
    assert first.status is Status.outcome_unknown, first.model_message
    assert "running this call was lost" in first.model_message, first.model_message
    assert second.ok, second.model_message
