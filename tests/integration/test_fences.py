"""Fenced side effects (docs/architecture.md, "Leases"): a worker whose main
process is frozen stops renewing the leases of the calls its pool runs; before
those leases lapse, the pool process running a claimed call stops it itself,
so the call judged lost is not still running when the batch's next step
starts on the other slot.

A stack of its own: the sweep held by the reads worker (the effects worker is
the one frozen), two effects slots, a 5-second lease, a 1-second resend and
the production visibility timeout (the frozen worker's message never comes
back during the test)."""

from __future__ import annotations

import os
import signal

import pytest

from runtime.types import Status
from tests.support.faults import FaultStack
from tests.support.tools import marks
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(150)]
LEASE = 5.0  # renewed every 1.25 s: a busy machine may delay renewals, not by 3.75 s


# The shell's steps stamp the same ticks as `ticking_write`, in files of their own.
TICKING = (
    "end=$(( $(date +%s) + {seconds} )); "
    "while [ $(date +%s) -lt $end ]; do date +%s.%N >> {label}.ticks; sleep 0.1; done"
)


def ticks(workspace, label: str) -> list[float]:
    stamped = workspace / f"{label}.ticks"
    if stamped.exists():
        return [float(line) for line in stamped.read_text().split()]
    return [m["at"] for m in marks(workspace, "ticks") if m["label"] == label]


def step(tool: str, label: str, seconds: float) -> dict:
    if tool == "shell":
        command = TICKING.format(seconds=max(int(seconds), 1), label=label)
        return {"id": label, "name": "shell", "arguments": {"command": command}}
    arguments = {"label": label, "seconds": seconds}
    return {"id": label, "name": "ticking_write", "arguments": arguments}


@pytest.mark.parametrize("tool", ["ticking_write", "shell"])
def test_a_frozen_main_process_never_lets_the_next_step_overlap_its_side_effect(
    tool, tmp_path, user_settings, workspace, request
):
    """The issue's shape: the chain's first step a Python tool or a command
    (the shell's bash, in a session of its own, dies with it)."""
    with FaultStack(
        tmp_path / "home",
        user_settings=user_settings,
        visibility_timeout=3600,
        effects_concurrency=2,
        lease_seconds=LEASE,
        resend_after=1.0,
        reads_workers=1,
        effects_workers=0,
    ) as stack:
        [judge] = stack.workers("reads")
        wait_for(lambda: (stack.sweep_holder() or ("", None))[1] == judge, what="the sweep held")
        frozen = stack.add_worker("effects")
        request.addfinalizer(lambda: _thaw(frozen["pid"]))
        steps = [step(tool, "a", 8 * LEASE), step(tool, "b", 0.5), step(tool, "c", 0.5)]
        with stack.client() as runtime:
            handle = runtime.submit(
                steps,
                mode="auto",
                workspace=workspace,
                rules={"allow": ["ticking_write", "shell"]},
                on_error="continue",
                timeout=120,
            )
            wait_for(lambda: len(ticks(workspace, "a")) >= 10, what="a running a second")
            os.kill(frozen["pid"], signal.SIGSTOP)
            # a's lease lapses with nobody renewing it: the sweep judges it lost
            # (its end in the ledger) and sends b, which waits for the frozen worker.
            wait_for(lambda: "a" in runtime.ledger.ends(handle.batch_id), what="a judged lost")
            os.kill(frozen["pid"], signal.SIGCONT)
            results = {r.call_id: r for r in handle.results(timeout=90)}

    assert results["a"].status is Status.outcome_unknown, results["a"].model_message
    assert results["b"].status is Status.ok, results["b"].model_message
    assert results["c"].status is Status.ok, results["c"].model_message
    a, b = ticks(workspace, "a"), ticks(workspace, "b")
    assert max(a) < min(b), f"a ran {max(a) - min(b):.1f} s after b started"
    assert max(a) - min(a) < 8 * LEASE - 1, "a ran to its end after it was judged lost"


def _thaw(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
