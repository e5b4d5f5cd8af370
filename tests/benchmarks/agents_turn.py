"""A1: what the OpenAI Agents SDK's way of running a turn costs (docs/
architecture.md, "Integrations"). The SDK runs each of a turn's function tools
through its own `needs_approval` and `on_invoke_tool`, so a turn of four no-op
reads is four one-call batches (`runtime/integrations/function_tools.py`);
the baseline is the same four calls as one batch through the Python client.
A scripted model (the SDK's `Model` interface) asks for the four calls, then
answers; a turn is timed from the run's start to its end, the SDK's own work
included, in one event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from uuid import uuid4

from agents import Agent, ModelResponse, Runner, Usage, set_tracing_disabled
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from runtime.integrations.batches import Options
from runtime.integrations.function_tools import function_tools
from tests.benchmarks import figures
from tests.benchmarks.compare import repeated
from tests.benchmarks.report import Figure, Target
from tests.benchmarks.tools import NOOP

CALLS = 4  # the turn's calls


class Turn(Model):
    """A turn of `CALLS` no-op reads, each with fresh call ids, then an answer."""

    async def get_response(self, system_instructions, input, *args, **kwargs):
        answered = any(
            isinstance(item, dict) and item.get("type") == "function_call_output"
            for item in (input if isinstance(input, list) else [])
        )
        if answered:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            message = ResponseOutputMessage(
                id="answer", type="message", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        calls = [
            ResponseFunctionToolCall(
                type="function_call", call_id=f"a1-{uuid4().hex}", name=NOOP, arguments="{}"
            )
            for _ in range(CALLS)
        ]
        return ModelResponse(output=calls, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the bench does not stream")


def a1_sdk(sides: figures.Sides, samples: int) -> list[float]:
    options = Options(mode="auto", workspace=sides.workspace)
    agent = Agent(
        name="a1", model=Turn(), tools=function_tools(sides.runtime, options, names=[NOOP])
    )

    async def turns() -> list[float]:
        taken = []
        for _ in range(samples):
            began = time.perf_counter()
            result = await Runner.run(agent, "go")
            taken.append(time.perf_counter() - began)
            if result.final_output != "done":
                raise figures.BenchError(f"A1: the SDK's run ended {result.final_output!r}")
        return taken

    sides.reads_sent["toolrun"] += samples * CALLS
    return asyncio.run(turns())


def a1_batch(sides: figures.Sides, samples: int) -> list[float]:
    def one() -> float:
        began = time.perf_counter()
        results = figures.submit(sides, figures.make_calls(NOOP, CALLS)).results(figures.WAIT)
        figures.check(results, "A1")
        return time.perf_counter() - began

    sides.reads_sent["toolrun"] += samples * CALLS
    return [one() for _ in range(samples)]


def measure(options: argparse.Namespace, bench, console) -> Figure:
    set_tracing_disabled(True)  # the SDK's exporter would need an OpenAI key
    o = options
    console.log(f"A1: {o.a1_samples} turns of {CALLS} reads through the Agents SDK x {o.repeats}")
    ours, theirs = repeated(
        lambda: a1_sdk(bench.sides, o.a1_samples),
        lambda: a1_batch(bench.sides, o.a1_samples),
        o.repeats,
    )
    p50 = lambda runs: [round(figures.percentile(r, 0.5) * 1000, 3) for r in runs]  # noqa: E731
    return Figure(
        "A1",
        f"a turn of {CALLS} no-op reads through the Agents SDK's function tools, p50",
        "ms",
        Target("ratio", "<=", 2.0),
        p50(ours),
        p50(theirs),
        note=f"{CALLS} one-call batches, as the SDK runs them; "
        f"baseline: the {CALLS} calls as one batch, Runtime.submit(...).results()",
    )
