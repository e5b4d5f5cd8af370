"""Tools the test suite registers (through TOOLRUN_TOOL_MODULES) to observe the
runtime from outside: side-effect counters and run intervals are files in the
workspace, so the tests read them across worker processes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pydantic import Field

from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, tool
from runtime.types import Risk

MARKS = ".marks"


def _mark(ctx: ToolContext, name: str, record: dict) -> None:
    folder = Path(ctx.workspace) / MARKS
    folder.mkdir(exist_ok=True)
    with open(folder / f"{name}.jsonl", "a") as handle:
        handle.write(json.dumps(record) + "\n")


def marks(workspace: Path, name: str) -> list[dict]:
    path = Path(workspace) / MARKS / f"{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


class Sleep(ToolInput):
    label: str
    seconds: float = Field(0.0, ge=0, le=30)


@tool(risk=Risk.read, idempotent=True)
def nap(args: Sleep, ctx: ToolContext) -> ToolOutput:
    """Sleep, recording when it started and ended."""
    start = time.time()
    _mark(ctx, "starts", {"label": args.label, "call_id": ctx.call_id, "pid": os.getpid()})
    time.sleep(args.seconds)
    _mark(
        ctx,
        "intervals",
        {
            "label": args.label,
            "start": start,
            "end": time.time(),
            "pid": os.getpid(),
            "call_id": ctx.call_id,
        },
    )
    return ToolOutput(content={"label": args.label}, message=f"slept {args.seconds}s", summary="ok")


class Held(ToolInput):
    label: str


@tool(risk=Risk.read, idempotent=True, timeout=60)
def held(args: Held, ctx: ToolContext) -> ToolOutput:
    """A read that runs until the test calls `release(workspace, label)`: a test
    that needs calls running waits for their marks (`marks(ws, "held")`), which
    also say which worker process runs each, instead of sleeping."""
    _hold(ctx, args.label)
    return ToolOutput(content={"label": args.label}, message="released", summary="ok")


@tool(risk=Risk.write, timeout=60)
def held_write(args: Held, ctx: ToolContext) -> ToolOutput:
    """A side effect (counted in `effects` when it starts) that runs until released."""
    started = {"label": args.label, "call_id": ctx.call_id, "at": time.time()}
    _mark(ctx, "effects", {**started, "pid": os.getpid()})
    _hold(ctx, args.label)
    return ToolOutput(content={"label": args.label}, message="released", summary="ok")


def _hold(ctx: ToolContext, label: str) -> None:
    record = {"label": label, "call_id": ctx.call_id, "pid": os.getpid()}
    _mark(ctx, "held", {**record, "ppid": os.getppid()})
    released = Path(ctx.workspace) / MARKS / f"release-{label}"
    deadline = time.monotonic() + 50  # never released: the test failed, do not hang its worker
    while not released.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{label} was never released")
        time.sleep(0.02)
    _mark(ctx, "released", {**record, "at": time.time()})


def held_running(workspace: Path, count: int, bound: float = 30.0) -> list[dict]:
    """The marks of the held calls, once `count` of them run. `bound` only stops
    a broken run from hanging; a test passes whatever the machine's speed."""
    deadline = time.monotonic() + bound
    while len(found := marks(workspace, "held")) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(found)} of {count} held calls started")
        time.sleep(0.02)
    return found


def release(workspace: Path, label: str) -> None:
    folder = Path(workspace) / MARKS
    folder.mkdir(exist_ok=True)
    (folder / f"release-{label}").touch()


class Count(ToolInput):
    label: str


@tool(risk=Risk.write)
def bump(args: Count, ctx: ToolContext) -> ToolOutput:
    """A side effect the tests count: one line per run."""
    _mark(ctx, "effects", {"label": args.label, "call_id": ctx.call_id, "at": time.time()})
    return ToolOutput(content={"label": args.label}, message="bumped", summary="bumped")


class Linger(ToolInput):
    label: str
    seconds: float = Field(0.0, ge=0, le=30)


@tool(risk=Risk.write)
def slow_write(args: Linger, ctx: ToolContext) -> ToolOutput:
    """A side effect that takes `seconds`, counted when it starts."""
    _mark(ctx, "effects", {"label": args.label, "call_id": ctx.call_id, "at": time.time()})
    time.sleep(args.seconds)
    return ToolOutput(content={"label": args.label}, message="written", summary="written")


@tool(risk=Risk.destructive)
def obliterate(args: Count, ctx: ToolContext) -> ToolOutput:
    """A destructive side effect the tests count."""
    _mark(ctx, "effects", {"label": args.label, "call_id": ctx.call_id, "at": time.time()})
    return ToolOutput(content={"label": args.label}, message="gone", summary="gone")


class Fail(ToolInput):
    message: str = "boom"
    risk_write: bool = False


@tool(risk=Risk.write)
def explode(args: Fail, ctx: ToolContext) -> ToolOutput:
    """A side effect that always raises."""
    _mark(ctx, "effects", {"label": "explode", "call_id": ctx.call_id, "at": time.time()})
    raise ValueError(args.message)


@tool(risk=Risk.read, timeout=1.0)
def stall(args: Sleep, ctx: ToolContext) -> ToolOutput:
    """Sleeps past its one-second timeout."""
    time.sleep(args.seconds)
    return ToolOutput(content=None, message="woke", summary="woke")


class Echo(ToolInput):
    text: str


@tool(risk=Risk.read)
def echo(args: Echo, ctx: ToolContext) -> ToolOutput:
    """Returns its argument, so secrets in arguments can be traced."""
    print(f"echo tool saw: {args.text}")
    return ToolOutput(content={"text": args.text}, message=args.text, summary=args.text)
