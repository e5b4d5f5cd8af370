"""What `submit` hands back, on the in-memory transport (tests/batch/conftest.py):
results streamed as they finish with notices of calls waiting for approval,
final results in the model's order, replies in a provider's dialect, and the
same for asyncio."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from runtime.errors import InvalidBatch
from runtime.types import ApprovalRequested, Status
from tests.support.tools import release

ALLOW = {"allow": ["bump"]}


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def test_the_stream_shows_a_notice_then_the_final_result_and_results_only_finals(rt, workspace):
    handle = rt.submit(
        [call("r", "nap", label="r"), call("w", "bump", label="w")],
        mode="default",
        workspace=workspace,
    )
    seen = []
    for event in handle.stream(10):
        if isinstance(event, ApprovalRequested):
            seen.append((event.call_id, "asks"))
            assert not handle.done and event.reason.startswith("write tools need approval")
            assert handle.approve(event.call_id, by="alice")
        else:
            seen.append((event.call_id, event.status))
    assert seen == [("r", Status.ok), ("w", "asks"), ("w", Status.ok)]
    assert handle.done
    assert [(r.call_id, r.status) for r in handle.results()] == [("r", Status.ok), ("w", Status.ok)]


def test_a_stream_without_notices_yields_one_final_result_per_call(rt, workspace):
    handle = rt.submit([call("w", "bump", label="w")], mode="default", workspace=workspace)
    while not rt.pending_approvals(handle.batch_id):
        time.sleep(0.01)  # the batch asks on its own thread
    assert handle.deny("w", "not now", by="bob")
    [result] = handle.stream(10, notices=False)
    assert result.status is Status.denied and "not now" in result.model_message


def test_a_stream_s_timeout_ends_the_batch_and_still_yields_every_call(rt, workspace):
    handle = rt.submit([call("r", "nap", label="r", seconds=5)], mode="auto", workspace=workspace)
    [result] = handle.stream(0.1)
    assert result.status is Status.timeout and handle.done


def test_cancel_through_the_handle_ends_calls_not_yet_started(rt, workspace):
    batch = [call("w1", "held_write", label="slow"), call("w2", "bump", label="x")]
    rules = {"allow": ["held_write", "bump"]}
    handle = rt.submit(batch, mode="auto", workspace=workspace, rules=rules)
    handle.cancel(by="test")  # w2 cannot have started: w1 runs until released
    release(workspace, "slow")
    assert handle.results(10)[-1].status is Status.cancelled


def test_replies_in_each_dialect_and_reply_needs_a_provider_message(rt, workspace):
    handle = rt.submit([call("toolu_1", "nap", label="a")], mode="auto", workspace=workspace)
    [block] = handle.as_anthropic(10)["content"]
    assert (block["tool_use_id"], block["is_error"]) == ("toolu_1", False)
    assert handle.as_openai()[0]["tool_call_id"] == "toolu_1"
    assert handle.as_responses()[0]["call_id"] == "toolu_1"
    with pytest.raises(InvalidBatch, match="not submitted as a provider message"):
        handle.reply()


def test_the_async_handle_streams_on_the_event_loop_and_keeps_the_results(rt, workspace):
    async def main():
        handle = await rt.asubmit(
            [call("a", "nap", label="a"), call("b", "bump", label="b")],
            mode="auto",
            workspace=workspace,
            rules=ALLOW,
        )
        streamed = [(r.call_id, r.status) async for r in handle]
        results = await handle.results()  # after a stream too: the handle keeps them
        return streamed, [r.call_id for r in results], await handle.as_openai()

    streamed, ordered, openai = asyncio.run(main())
    assert streamed == [("a", Status.ok), ("b", Status.ok)] and ordered == ["a", "b"]
    assert [m["tool_call_id"] for m in openai] == ["a", "b"]


def test_the_async_stream_shows_notices_and_its_timeout_ends_the_batch(rt, workspace):
    rt._services = dataclasses.replace(rt._services, approval_timeout=3600)

    async def main():
        handle = await rt.asubmit(
            [call("w", "bump", label="w"), call("r", "nap", label="r", seconds=5)],
            mode="default",
            workspace=workspace,
        )
        seen = []
        async for event in handle.astream(0.2):
            seen.append((event.call_id, getattr(event, "status", "asks")))
        return seen

    # A guard, not a measure: the timeout must end the approval's wait, not the hour.
    seen = asyncio.run(asyncio.wait_for(main(), 10))
    assert seen[0] == ("w", "asks")
    assert seen[1:] == [("w", Status.denied), ("r", Status.skipped)]
