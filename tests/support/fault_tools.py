"""Tools that misbehave on purpose, for the fault tests, `tests/test_fuzz.py`
and `python -m tests.soak`. Stacks that need them load them beside the usual
test tools: `TOOLRUN_TOOL_MODULES=tests.support.tools,tests.support.fault_tools`.

Every run is a line in the workspace (`tests.support.tools.marks`), written
before the tool misbehaves, so a test can count runs across worker processes,
including runs whose process died.
"""

from __future__ import annotations

import os
import re
import resource
import socket
import subprocess
import sys
import time
from typing import Any

from pydantic import BaseModel, Field

from runtime import sessions
from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, tool
from runtime.tools.shell import shell
from runtime.types import Risk
from tests.support.clock_skew import skew_from_environment
from tests.support.tools import _mark

skew_from_environment()  # a worker a test started with a wrong clock

FAULT_TOOLS = "tests.support.tools,tests.support.fault_tools"
TIMEOUT = 0.5  # the misbehaving tools' own timeout, seconds
# The queues: a `read` tool runs on the reads queue, any other risk on the effects
# queue (both prefork). Each timeout tool exists once per queue.
POOLS = {"read": Risk.read, "write": Risk.write}


class Label(ToolInput):
    label: str
    seconds: float = Field(0.0, ge=0, le=60)


def _run(ctx: ToolContext, name: str, label: str, **extra: Any) -> None:
    _mark(
        ctx,
        "runs",
        {
            "tool": name,
            "label": label,
            "call_id": ctx.call_id,
            "pid": os.getpid(),
            "at": time.time(),
            **extra,
        },
    )


@tool(risk=Risk.write)
def slow_bump(args: Label, ctx: ToolContext) -> ToolOutput:
    """A side effect that takes `seconds`: counted when it starts and when it ends."""
    _mark(
        ctx,
        "effects",
        {"label": args.label, "call_id": ctx.call_id, "at": time.time(), "pid": os.getpid()},
    )
    time.sleep(args.seconds)
    _mark(ctx, "effects_done", {"label": args.label, "call_id": ctx.call_id, "at": time.time()})
    return ToolOutput(content={"label": args.label}, message="bumped", summary="bumped")


@tool(risk=Risk.write)
def crash_effect(args: Label, ctx: ToolContext) -> ToolOutput:
    """A side effect whose process dies in the middle of it (counted first)."""
    _mark(
        ctx,
        "effects",
        {"label": args.label, "call_id": ctx.call_id, "at": time.time(), "pid": os.getpid()},
    )
    time.sleep(args.seconds)
    os._exit(17)


@tool(risk=Risk.read)
def crash_read(args: Label, ctx: ToolContext) -> ToolOutput:
    """A read whose process dies every time it runs (counted first)."""
    _run(ctx, "crash_read", args.label)
    time.sleep(args.seconds)
    os._exit(17)


class Hog(ToolInput):
    label: str
    megabytes: int = Field(2048, ge=1, le=65536)


@tool(risk=Risk.write, idempotent=True)
def hog(args: Hog, ctx: ToolContext) -> ToolOutput:
    """Allocates until its process runs out of memory: a soft address-space limit
    (about 256 MiB above what the process holds) stands in for the machine's, so
    the test never endangers the host. The limit is lifted again before returning."""
    _run(ctx, "hog", args.label)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        held = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (held + (256 << 20), hard))
    chunks = []
    try:
        for _ in range(args.megabytes):
            chunks.append(bytearray(1 << 20))
    finally:
        chunks.clear()
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return ToolOutput(content=None, message="allocated", summary="allocated")


def _spin(args: Label, ctx: ToolContext) -> ToolOutput:
    """Burns CPU in pure Python until `seconds` pass (default: far past its timeout)."""
    _run(ctx, "spin", args.label)
    end = time.monotonic() + (args.seconds or 60)
    count = 0
    while time.monotonic() < end:
        count += 1
    _run(ctx, "spin_end", args.label)
    return ToolOutput(content=count, message="spun", summary="spun")


def _block(args: Label, ctx: ToolContext) -> ToolOutput:
    """Waits on a loopback socket that never sends."""
    _run(ctx, "block", args.label)
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    try:
        client.recv(1)  # nobody accepts or writes: blocks in C until the socket closes
    finally:
        client.close()
        listener.close()
    _run(ctx, "block_end", args.label)
    return ToolOutput(content=None, message="received", summary="received")


IGNORE_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def _stubborn(args: Label, ctx: ToolContext) -> ToolOutput:
    """Waits for a child that ignores SIGTERM (a thread cannot ignore signals
    itself: only a process's main thread may install handlers)."""
    child = subprocess.Popen([sys.executable, "-c", IGNORE_TERM])
    _run(ctx, "stubborn", args.label, child=child.pid)
    child.wait()
    return ToolOutput(content=None, message="child ended", summary="child ended")


def _spawn(args: Label, ctx: ToolContext) -> ToolOutput:
    """Waits for a long `sleep` it started."""
    child = subprocess.Popen(["sleep", "60"])
    _run(ctx, "spawn", args.label, child=child.pid)
    child.wait()
    return ToolOutput(content=None, message="child ended", summary="child ended")


def _backtrack(args: Label, ctx: ToolContext) -> ToolOutput:
    """A backtracking regular expression (about 2**40 steps) in C. `re` checks
    for signals now and then, so an alarm in the process stops it; a thread's
    timer does not."""
    _run(ctx, "backtrack", args.label)
    re.match(r"(a+)+$", "a" * 40 + "b")
    _run(ctx, "backtrack_end", args.label)
    return ToolOutput(content=None, message="matched", summary="matched")


def _hold_gil(args: Label, ctx: ToolContext) -> ToolOutput:
    """Holds the GIL in one C call for minutes without looking at signals: no
    timer, alarm or thread inside the process runs until it returns."""
    _run(ctx, "hold_gil", args.label)
    sum(range(10**10))
    _run(ctx, "hold_gil_end", args.label)
    return ToolOutput(content=None, message="summed", summary="summed")


# Stalls the process survives: its call ends at its timeout.
STALLS = {
    "spin": _spin,
    "block": _block,
    "stubborn": _stubborn,
    "spawn": _spawn,
    "backtrack": _backtrack,
}
for _pool, _risk in POOLS.items():
    for _stall, _body in STALLS.items():
        tool(name=f"{_stall}_{_pool}", risk=_risk, idempotent=True, timeout=TIMEOUT)(_body)
    # The process does not survive this one: it is killed at the hard limit.
    tool(name=f"hold_gil_{_pool}", risk=_risk, timeout=TIMEOUT)(_hold_gil)


@tool(risk=Risk.write, timeout=TIMEOUT)
def overrun_write(args: Label, ctx: ToolContext) -> ToolOutput:
    """A side effect that sleeps `seconds`, past its timeout: its start and the
    moment it really stopped are stamped (pid included), so a test can see
    whether ordered steps overlapped."""
    _mark(
        ctx, "stamps", {"label": args.label, "edge": "start", "at": time.time(), "pid": os.getpid()}
    )
    try:
        time.sleep(args.seconds)
    finally:
        _mark(
            ctx,
            "stamps",
            {"label": args.label, "edge": "end", "at": time.time(), "pid": os.getpid()},
        )
    return ToolOutput(content=None, message="slept", summary="slept")


# The shell tool itself with a short timeout, so that its hard limit comes soon.
SHORT_SHELL_TIMEOUT = 2.0
tool(
    name="short_shell",
    risk=Risk.destructive,
    timeout=SHORT_SHELL_TIMEOUT,
    subject=("command", "command"),
)(shell)


class Command(ToolInput):
    command: str


@tool(risk=Risk.write, timeout=TIMEOUT)
def stuck_shell(args: Command, ctx: ToolContext) -> ToolOutput:
    """Starts a bash command in a session of its own, as the shell tool does
    (recorded the same way), then holds the GIL: its timeout cannot stop it,
    only the hard limit can, and the command runs on meanwhile."""
    subprocess.Popen(
        sessions.wrapped(["bash", "-c", args.command]),
        cwd=ctx.resolve("."),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    sum(range(10**10))
    return ToolOutput(content=None, message="summed", summary="summed")


class Inner(BaseModel):
    key: str = Field(max_length=64)
    value: int | None = None


class Probe(ToolInput):
    text: str = Field(max_length=4096)
    count: int = Field(0, ge=0, le=1000)
    flag: bool = False
    items: list[str] = Field(default_factory=list, max_length=16)
    inner: Inner | None = None


@tool(risk=Risk.read)
def probe(args: Probe, ctx: ToolContext) -> ToolOutput:
    """The fuzz tests' read: records what it ran with, returns it whole (bounded by the runtime)."""
    _mark(ctx, "probes", {"call_id": ctx.call_id, "arguments": args.model_dump()})
    return ToolOutput(content=args.model_dump(), message=args.text, summary="probed")


@tool(risk=Risk.write)
def probe_write(args: Probe, ctx: ToolContext) -> ToolOutput:
    """The fuzz tests' side effect: counted like `probe`."""
    _mark(ctx, "probes", {"call_id": ctx.call_id, "arguments": args.model_dump()})
    return ToolOutput(content={"count": args.count}, message="written", summary="written")


class Blob(ToolInput):
    size: int = Field(ge=0, le=4 << 20)


@tool(risk=Risk.read)
def blob(args: Blob, ctx: ToolContext) -> ToolOutput:
    """Returns `size` characters: the runtime must cut it to its result bound."""
    _mark(ctx, "probes", {"call_id": ctx.call_id, "arguments": args.model_dump()})
    return ToolOutput(content="x" * args.size, message="y" * args.size, summary="blob")


class Burn(ToolInput):
    label: str
    ms: int = Field(100, ge=0, le=5000)
    child_ms: int = Field(0, ge=0, le=5000)


@tool(risk=Risk.write, idempotent=True)
def burn(args: Burn, ctx: ToolContext) -> ToolOutput:
    """Spends `child_ms` of CPU in a child process it waits for, then `ms` of
    its own process's: what a call's usage must count, children included."""
    _run(ctx, "burn", args.label)
    if args.child_ms:
        spin = f"import time\nend = time.process_time() + {args.child_ms / 1000}\n"
        spin += "while time.process_time() < end: pass\n"
        subprocess.run([sys.executable, "-c", spin], check=True)
    end = time.process_time() + args.ms / 1000
    while time.process_time() < end:
        pass
    return ToolOutput(content=None, message="burnt", summary="burnt", spent={"burns": 1})


@tool(risk=Risk.write)
def tagged_write(args: Label, ctx: ToolContext) -> ToolOutput:
    """A side effect that records the Celery task it runs in (its id; None off
    Celery) and when, so a test sees which steps of a chain shared a task."""
    from celery import current_task

    task = current_task.request.id if current_task else None
    _mark(
        ctx,
        "tasks",
        {
            "label": args.label,
            "call_id": ctx.call_id,
            "task": task,
            "pid": os.getpid(),
            "at": time.time(),
        },
    )
    time.sleep(args.seconds)
    return ToolOutput(content={"label": args.label}, message="tagged", summary="tagged")


@tool(risk=Risk.write)
def ticking_write(args: Label, ctx: ToolContext) -> ToolOutput:
    """A side effect that lasts `seconds` and marks each tenth of a second it
    is alive (`ticks`), so a test sees until when it ran, even if its process
    was killed, and whether another step ran meanwhile."""
    end = time.time() + args.seconds
    while True:
        _mark(ctx, "ticks", {"label": args.label, "at": time.time(), "pid": os.getpid()})
        if time.time() >= end:
            return ToolOutput(content={"label": args.label}, message="ticked", summary="ticked")
        time.sleep(0.1)
