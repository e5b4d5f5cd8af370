"""The event stream's cursor: a reconnecting client gets exactly what its last
event's id lacks, whatever order the results reached this process in."""

from __future__ import annotations

import asyncio
import json

import pytest

from runtime.client.handle import BatchHandle
from runtime.client.run import BatchRun
from runtime.gateway.cursors import Cursors
from runtime.gateway.events import stream
from runtime.gateway.problems import Problem
from runtime.types import ApprovalRequested, Batch, ErrorInfo, Status, ToolCall, ToolResult


def cursor(text):
    return Cursors().parse(text)


def _handle(n: int) -> BatchHandle:
    """A handle on a batch that nothing follows: the test feeds its events."""
    calls = [ToolCall(id=f"c{i}", name="read_file", arguments={}) for i in range(n)]
    return BatchHandle(BatchRun(Batch(id="b", calls=calls, workspace="/"), services=None))


def _feed(handle: BatchHandle, event) -> None:
    events = handle._run.events
    (events.notice if isinstance(event, ApprovalRequested) else events.end)(event)


def _asks(call_id: str) -> ApprovalRequested:
    return ApprovalRequested(call_id=call_id, tool="read_file", reason="asks")


def _end(call_id: str) -> ToolResult:
    return ToolResult(
        call_id=call_id,
        tool="read_file",
        status=Status.error,
        model_message="m",
        summary="s",
        error=ErrorInfo(kind="k", message="m"),
    )


async def _collect(handle, sent=0, feed=()):
    got = []

    async def run():
        async for event in stream(handle, sent):
            got.append(event)

    task = asyncio.create_task(run())
    await asyncio.sleep(0)
    for event in feed:
        _feed(handle, event)
        await asyncio.sleep(0)
    await asyncio.wait_for(task, 5)
    return got


def test_a_resumed_stream_sends_only_what_the_cursor_lacks():
    handle = _handle(3)
    notice = _asks("c1")
    first = asyncio.run(_collect(handle, feed=[_end("c2"), notice, _end("c0"), _end("c1")]))
    assert [e["event"] for e in first] == ["result", "notice", "result", "result", "end"]
    assert json.loads(first[1]["data"]) == {"call_id": "c1", "tool": "read_file", "reason": "asks"}
    after_two = cursor(first[1]["id"])
    # Another process learnt them in another order: the cursor still says which were sent.
    again = asyncio.run(_collect(handle, after_two))
    assert [(e["event"], e.get("id") and e["data"].count('"c0"')) for e in again[:-1]] == [
        ("result", 1),
        ("result", 0),
    ]
    assert asyncio.run(_collect(handle, cursor(first[3]["id"])))[0]["event"] == "end"


def test_a_notice_after_its_final_result_is_not_sent():
    handle = _handle(1)
    _feed(handle, _end("c0"))
    _feed(handle, _asks("c0"))
    assert [e["event"] for e in asyncio.run(_collect(handle))] == ["result", "end"]


def test_a_cursor_that_is_not_ours_is_a_400():
    assert cursor(None) == 0
    for text in ("zz", "-", "-1", " 1", "1" * 100_001):
        with pytest.raises(Problem):
            cursor(text)


async def _drain(handle, sent, cursors):
    return [event async for event in stream(handle, sent, cursors=cursors)]


@pytest.mark.parametrize("calls", [400, 4000])
def test_ids_of_a_large_batch_stay_short_and_resume_exactly_here(calls):
    """An id no longer carries the whole cursor: bounded whatever the batch's
    size, so a stream's bytes grow with its calls, not their square."""
    handle = _handle(calls)
    for i in reversed(range(calls)):  # the worst order for a bitmap
        _feed(handle, _end(f"c{i}"))
    here = Cursors()
    events = asyncio.run(_drain(handle, 0, here))[:-1]
    assert len(events) == calls
    assert max(len(e["id"]) for e in events) <= 40
    middle = calls // 2
    rest = asyncio.run(_drain(handle, here.parse(events[middle]["id"]), here))
    assert [e["data"] for e in rest[:-1]] == [e["data"] for e in events[middle + 1 :]]
    assert rest[-1]["event"] == "end"


def test_an_id_from_another_process_resends_only_past_its_watermark():
    handle = _handle(300)
    for i in [*range(250), 299, *range(250, 299)]:
        _feed(handle, _end(f"c{i}"))
    events = asyncio.run(_drain(handle, 0, Cursors()))[:-1]
    elsewhere = Cursors()  # knows no log of the first stream
    after = events[260]["id"]  # c0..c249 and c299 sent, then c250..c259
    rest = asyncio.run(_drain(handle, elsewhere.parse(after), elsewhere))[:-1]
    ids = [json.loads(e["data"])["call_id"] for e in rest]
    assert sorted(ids) == sorted(f"c{i}" for i in range(260, 300))  # c299 a second time
