"""The tools toolrun runs in the benchmark (loaded through TOOLRUN_TOOL_MODULES).

Their bodies do nothing or sleep, exactly like the baseline's tasks in
`baseline.py`, so every figure measures the runtime around the body.
"""

from __future__ import annotations

import time

from pydantic import Field

from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, tool
from runtime.types import Risk

MODULE = __name__
NOOP, SLEEP, WRITE = "bench_noop", "bench_sleep", "bench_write"


class Nothing(ToolInput):
    pass


class Nap(ToolInput):
    seconds: float = Field(0.0, ge=0, le=10)


@tool(name=NOOP, risk=Risk.read, idempotent=True)
def bench_noop(args: Nothing, ctx: ToolContext) -> ToolOutput:
    """Do nothing (a read)."""
    return ToolOutput(content=None, message="ok", summary="ok")


@tool(name=SLEEP, risk=Risk.read, idempotent=True)
def bench_sleep(args: Nap, ctx: ToolContext) -> ToolOutput:
    """Sleep for `seconds` (a read)."""
    time.sleep(args.seconds)
    return ToolOutput(content=None, message="ok", summary="ok")


@tool(name=WRITE, risk=Risk.write)
def bench_write(args: Nothing, ctx: ToolContext) -> ToolOutput:
    """Do nothing, as an ordered, side-effecting step (a write that is not idempotent)."""
    return ToolOutput(content=None, message="ok", summary="ok")
