"""One invocation of a tool, in process: every outcome becomes a `ToolResult`
(a timeout, a `ToolError`, any other exception, output that cannot be
formatted), and transient failures of safe tools are retried (tenacity)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from runtime.errors import CallTimedOut, ToolError
from runtime.execution.invocation import invoke
from runtime.gate.admission import Admitted
from runtime.gate.decision import Decision
from runtime.registry.capabilities import Registry, ToolInput, ToolOutput, tool
from runtime.settings import Settings
from runtime.testing import memory_runtime
from runtime.types import ApprovalRequested, CallMessage, Mode, Risk, Status, ToolCall

TOOLS = Registry()


class Times(ToolInput):
    failures: int = 0


class Flaky(ConnectionError):
    pass


interrupted = threading.Event()
tries: list[int] = []


@tool(risk=Risk.read, timeout=0.1, into=TOOLS)
def spin(args: Times, ctx) -> ToolOutput:
    """Busy until interrupted."""
    try:
        while True:
            time.sleep(0.001)
    except CallTimedOut:
        interrupted.set()
        raise


class NoSuchBranch(ToolError):
    status = Status.invalid_arguments


@tool(risk=Risk.read, into=TOOLS)
def checkout(args: Times, ctx) -> ToolOutput:
    raise NoSuchBranch("no branch 'mian'; did you mean 'main'?")


class NoAnswer(ToolError):
    """A tool's own timeout (a shell command's, an MCP server's)."""

    status = Status.timeout


@tool(risk=Risk.read, into=TOOLS)
def slow_lookup(args: Times, ctx) -> ToolOutput:
    raise NoAnswer("the server did not answer within 1 s")


@tool(risk=Risk.external, into=TOOLS)
def slow_upload(args: Times, ctx) -> ToolOutput:
    raise NoAnswer("the server did not answer within 1 s")


@tool(risk=Risk.read, into=TOOLS)
def crash(args: Times, ctx) -> ToolOutput:
    raise KeyError("missing")


@tool(risk=Risk.read, into=TOOLS)
def odd_output(args: Times, ctx) -> dict:
    return {(1, 2): "a tuple is no JSON key"}


@tool(risk=Risk.read, transient=[Flaky], retry_max_delay=1.0, into=TOOLS)
def flaky_read(args: Times, ctx) -> str:
    tries.append(1)
    if len(tries) <= args.failures:
        raise Flaky(f"try {len(tries)}")
    return "fine"


@tool(risk=Risk.write, transient=[Flaky], into=TOOLS)
def flaky_write(args: Times, ctx) -> str:
    tries.append(1)
    raise Flaky("the write may have happened")


class Burn(ToolInput):
    own_ms: int = 0
    child_ms: int = 0


CHILD = """
import resource, time
while time.process_time() < {seconds}:
    pass
usage = resource.getrusage(resource.RUSAGE_SELF)
print((usage.ru_utime + usage.ru_stime) * 1000)
"""


@tool(risk=Risk.read, into=TOOLS)
def burn(args: Burn, ctx) -> dict:
    """Busy for `own_ms` of its thread's CPU time, then waits for a child
    process busy for `child_ms` of its own; what the child says it used."""
    until = time.thread_time() + args.own_ms / 1000
    while time.thread_time() < until:
        pass
    if not args.child_ms:
        return {"child_ms": 0.0}
    script = CHILD.format(seconds=args.child_ms / 1000)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    return {"child_ms": float(done.stdout)}


@pytest.fixture(autouse=True)
def _fresh():
    tries.clear()
    interrupted.clear()


def run(tmp_path, name, *, delivery=1, retries: list | None = None, sent_at=None, **arguments):
    spec = TOOLS.get(name)
    call = ToolCall(id="c1", name=name, arguments=arguments)
    admitted = Admitted(call, spec, spec.input_model(**arguments), Decision.allow("t", rule="t"))
    message = CallMessage(
        batch_id="b1",
        call_id="c1",
        tool=name,
        arguments=arguments,
        mode=Mode.auto,
        workspace=str(tmp_path),
        position=0,
        policy={},
        decision=admitted.decision.as_dict(),
        sent_at=sent_at,
    )
    seen = [] if retries is None else retries
    return invoke(
        admitted,
        message,
        Settings(home=tmp_path),
        delivery=delivery,
        worker="w@h",
        on_retry=lambda attempt, error: seen.append((attempt, str(error))),
    )


def test_a_tool_past_its_timeout_ends_timeout_and_its_thread_is_interrupted(tmp_path):
    result = run(tmp_path, "spin")
    assert result.status is Status.timeout and "timed out after 0.1 s" in result.model_message
    assert interrupted.wait(5)  # a guard: the tool's thread got CallTimedOut


def test_a_tool_error_is_read_by_the_model_with_its_own_status_and_kind(tmp_path):
    result = run(tmp_path, "checkout")
    assert (result.status, result.error.kind) == (Status.invalid_arguments, "NoSuchBranch")
    assert result.model_message == "checkout: no branch 'mian'; did you mean 'main'?"


def test_a_read_cut_off_by_its_own_timeout_ends_timeout(tmp_path):
    result = run(tmp_path, "slow_lookup")
    assert (result.status, result.error.kind) == (Status.timeout, "NoAnswer")
    assert result.model_message == "slow_lookup: the server did not answer within 1 s"


def test_a_side_effect_cut_off_by_its_own_timeout_has_an_unknown_outcome(tmp_path):
    result = run(tmp_path, "slow_upload")
    assert (result.status, result.error.kind) == (Status.outcome_unknown, "timeout")
    assert "may have done part of its work" in result.model_message
    assert "the server did not answer within 1 s" in result.model_message


def test_any_other_exception_is_an_error_whose_kind_is_its_type(tmp_path):
    result = run(tmp_path, "crash")
    assert (result.status, result.error.kind) == (Status.error, "KeyError")
    assert result.model_message == "crash: KeyError: 'missing'" and result.worker == "w@h"


def test_output_that_cannot_be_formatted_is_an_error_not_a_crash(tmp_path):
    result = run(tmp_path, "odd_output")
    assert (result.status, result.error.kind) == (Status.error, "format")
    assert "could not be formatted: TypeError" in result.model_message


def test_a_transient_failure_of_a_read_is_retried_and_counted(tmp_path):
    retries = []
    result = run(tmp_path, "flaky_read", failures=2, retries=retries)
    assert (result.status, result.model_message, result.attempts) == (Status.ok, "fine", 3)
    assert retries == [(1, "try 1"), (2, "try 2")]


def test_retries_stop_at_the_spec_s_attempts(tmp_path):
    result = run(tmp_path, "flaky_read", failures=10, delivery=2)
    assert (result.status, result.error.kind) == (Status.error, "Flaky")
    assert len(tries) == 3 and result.attempts == 4  # this delivery's 3 tries, one before it


def test_a_side_effect_that_is_not_idempotent_is_never_retried(tmp_path):
    result = run(tmp_path, "flaky_write")
    assert (result.status, result.attempts, len(tries)) == (Status.error, 1, 1)


def test_cpu_time_counts_the_tool_and_the_children_it_waited_for(tmp_path):
    result = run(tmp_path, "burn", own_ms=50, child_ms=100)
    child = result.content["child_ms"]
    assert child >= 100
    # The kernel's figures, rounded apart: a millisecond of slack each side.
    assert result.cpu_ms >= 50 + child - 2, (result.cpu_ms, child)


def test_cpu_time_of_a_tool_that_failed_is_kept_too(tmp_path):
    assert run(tmp_path, "crash").cpu_ms >= 0


def test_queue_wait_runs_from_the_posting_to_the_tool_s_start(tmp_path):
    result = run(tmp_path, "burn", sent_at=time.time() - 1.5)
    assert result.queue_wait_ms >= 1500
    assert run(tmp_path, "burn").queue_wait_ms is None  # posted by a client that did not say
    # A sender's clock ahead of the worker's: no negative wait.
    assert run(tmp_path, "burn", sent_at=time.time() + 60).queue_wait_ms == 0


@tool(risk=Risk.write, into=TOOLS)
def reported_write(args: Times, ctx) -> ToolOutput:
    ctx.spend(credits=1)
    return ToolOutput(content=None, message="done", summary="done", spent={"credits": 3, "x": "n"})


@tool(risk=Risk.read, into=TOOLS)
def spend_then_fail(args: Times, ctx) -> ToolOutput:
    ctx.spend(usd=0.25)
    ctx.spend(usd=0.5, calls=1)
    raise RuntimeError("upstream refused")


def test_what_a_tool_reported_spending_stays_in_its_usage_when_it_then_fails(tmp_path):
    result = run(tmp_path, "spend_then_fail")
    assert result.status is Status.error
    assert result.usage.reported == {"usd": 0.75, "calls": 1.0}
    assert result.usage.wall_ms == result.duration_ms and result.usage.cpu_ms is not None


def test_a_calls_usage_counts_its_wait_for_an_approval_and_what_the_tool_reported(tmp_path):
    """On the in-process transport: the call waits for a person's answer, and
    its usage says how long, beside its wall and CPU time and the tool's own
    (numeric) report of what it spent."""
    with memory_runtime(TOOLS.get("reported_write"), workspace=tmp_path) as rt:
        handle = rt.submit(
            [{"id": "w", "name": "reported_write", "arguments": {}}],
            mode="default",
            workspace=tmp_path,
        )
        assert isinstance(next(iter(handle.stream(timeout=30))), ApprovalRequested)
        time.sleep(0.3)
        assert handle.approve("w", by="test")
        (result,) = handle.results(timeout=30)
    assert result.ok
    assert result.usage.approval_ms >= 300
    assert result.usage.wall_ms >= 0 and result.usage.cpu_ms >= 0
    assert result.usage.reported == {"credits": 4.0}  # ctx.spend's and the output's
    assert result.usage.cost is None  # no price table
