"""Two ends of one call made while the ledger is away: the end a client
streams is the end the ledger keeps (docs/architecture.md, "One end per
call").

A side effect's pool process is killed while the ledger is cut: the worker's
main process ends the call `outcome_unknown` and keeps that row in its
buffer; the message comes back, and its second delivery, unable to claim the
call, fails closed with an `error` row kept in the pool process's buffer.
Both may have ended the call. Then the whole worker is killed, so neither
buffer lands: the sweep writes the end Redis holds, which must be the one the
client was told."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runtime.types import Status
from tests.support.faults import FaultStack
from tests.support.tools import marks
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]
ALLOW = {"allow": ["held_write"]}
KILLED = "exited with 'signal 9 (SIGKILL)'"
FAILED_CLOSED = "ledger unavailable before w1"


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture
def stack(tmp_path, user_settings):
    """The sweep looks at a batch once it is `resend_after` old and writes an
    announced end the ledger lacks after `unrecorded_patience`: 3 s and 1 s here,
    not 15 and 10, so the lost rows' end lands seconds after the kill."""
    home = tmp_path / "home"
    with FaultStack(
        home, user_settings=user_settings, unrecorded_patience=1.0, resend_after=3.0
    ) as stack:
        yield stack


def logged(path: str, *lines: str, bound: float = 60.0) -> None:
    """Wait until the worker's log has every one of `lines` (the bound only
    stops a broken run from hanging)."""
    deadline = time.monotonic() + bound
    while not all(line in (text := Path(path).read_text(errors="replace")) for line in lines):
        assert time.monotonic() < deadline, f"{lines} not logged: {text[-3000:]}"
        time.sleep(0.1)


def test_two_ends_made_while_the_ledger_is_cut_leave_the_streamed_one(stack, workspace):
    batch = [call("w1", "held_write", label="w1"), call("r1", "nap", label="r1")]
    with stack.client() as runtime:
        handle = runtime.submit(
            batch, mode="auto", workspace=workspace, rules=ALLOW, on_error="continue", timeout=90
        )
        running = wait_for(lambda: marks(workspace, "effects"), 30, "run of w1")
        [worker] = stack.workers("effects")
        with stack.ledger_cut():
            stack.kill_pool_process(running[0]["pid"])
            # The kill, and a delivery that failed closed: after the kill (the
            # message requeued), or before it on a busy machine (the message
            # delivered again meanwhile: then its end was published first, and
            # the killed process's end yields to it, logging no "was lost").
            logged(worker["log"], KILLED, FAILED_CLOSED)
            time.sleep(1.0)  # each delivery publishes right after it logs
            stack.kill_worker(worker)  # both rows kept in memory are lost
            stack.add_worker("effects")

        results = {r.call_id: r for r in handle.results(timeout=90)}
        ledger = runtime.ledger
        wait_for(lambda: "w1" in ledger.ends(handle.batch_id), 60, "end of w1 in the ledger")
        ends = ledger.ends(handle.batch_id)

    streamed, kept = results["w1"], ends["w1"]
    assert streamed.status in (Status.outcome_unknown, Status.error), streamed.model_message
    assert (kept.status, kept.model_message) == (streamed.status, streamed.model_message)
    assert [m["label"] for m in marks(workspace, "effects")] == ["w1"]  # never run twice
