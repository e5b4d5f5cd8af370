"""A batch's transcript from a real SQLite ledger: every call with its
decision, approval, attempts and result, the reply of a provider message,
totals; the same document however often it is built once the batch ended."""

from __future__ import annotations

import time

import pytest

from runtime import Registry, Risk, ToolInput, memory_runtime, tool, transcript
from runtime.errors import InvalidBatch
from runtime.types import ApprovalRequested
from tests.support.transcripts import valid
from tests.transcript.conftest import KEY

SECRET = "AKIAIOSFODNN7EXAMPLE"
BURNING = Registry()


class Burn(ToolInput):
    label: str
    ms: int = 50


def _burn(ms: int) -> None:
    until = time.thread_time() + ms / 1000
    while time.thread_time() < until:
        pass


@tool(risk=Risk.read, into=BURNING)
def burn(args: Burn, ctx) -> str:
    """Busy for `ms` of its thread's CPU time."""
    _burn(args.ms)
    return "burnt"


@tool(risk=Risk.write, into=BURNING)
def burn_write(args: Burn, ctx) -> str:
    """Busy for `ms` of its thread's CPU time, as a side effect."""
    _burn(args.ms)
    return "burnt"


def _approve_all(handle, by="bob"):
    for event in handle.stream(timeout=30):
        if isinstance(event, ApprovalRequested):
            handle.approve(event.call_id, by=by)
    return handle.results()


def test_every_call_with_its_decision_approval_attempt_and_result(rt, workspace):
    handle = rt.submit(
        [
            {"id": "e1", "name": "echo", "arguments": {"text": f"key {SECRET}"}},
            {"id": "b1", "name": "bump", "arguments": {"label": "x"}},
            {"id": "u1", "name": "no_such_tool", "arguments": {}},
        ],
        mode="default",
        workspace=workspace,
        submitter="alice@test",
        rules={"deny": ["obliterate"]},
    )
    _approve_all(handle)
    document = valid(transcript.build(rt.ledger, handle.batch_id))

    batch = document["batch"]
    assert batch["id"] == handle.batch_id and batch["state"] == "ended"
    assert batch["submitter"] == "alice@test" and batch["mode"] == "default"
    assert batch["workspace"] == str(workspace) and batch["on_error"] == "stop"
    assert batch["policy"]["files"] == ["submit"]  # the batch's own rule
    assert document["conversation"] is None and document["reply"] is None
    assert [s["calls"] for s in document["plan"]["stages"]] == [["e1"], ["b1"], ["u1"]]

    echo, bump, unknown = document["calls"]
    assert [c["id"] for c in document["calls"]] == ["e1", "b1", "u1"]
    assert echo["arguments"] == {"text": "key [REDACTED:aws_access_key]"}
    assert echo["decision"]["effect"] == "allow" and echo["decision"]["rule"] == "mode:default"
    assert echo["decision"]["source"] == "mode" and echo["decision"]["mode"] == "default"
    assert echo["result"]["status"] == "ok" and echo["result"]["redactions"] == {
        "aws_access_key": 1
    }
    assert SECRET not in str(document)
    [attempt] = echo["attempts"]
    assert attempt["ended"] == "ok" and attempt["worker"] and attempt["wall_ms"] >= 0

    assert bump["decision"]["effect"] == "ask" and bump["risk"] == "write"
    approval = bump["approval"]
    assert approval["status"] == "approved" and approval["answered_by"] == "bob"
    assert approval["arguments_changed"] is False and approval["waited_ms"] >= 0
    assert bump["result"]["status"] == "ok" and len(bump["attempts"]) == 1

    assert unknown["result"]["status"] == "unknown_tool" and unknown["attempts"] == []

    totals = document["totals"]
    assert totals["calls"] == totals["ended"] == 3
    assert totals["by_status"] == {"ok": 2, "unknown_tool": 1}
    assert totals["approvals"] == totals["approvals_given"] == 1
    assert totals["redactions"] == {"aws_access_key": 2}  # in the arguments and the result


def test_an_approval_with_changed_arguments_and_a_denied_one(rt, workspace):
    handle = rt.submit(
        [
            {"id": "a", "name": "bump", "arguments": {"label": "first"}},
            {"id": "d", "name": "bump", "arguments": {"label": "second"}},
        ],
        mode="default",
        workspace=workspace,
        on_error="continue",
    )
    for event in handle.stream(timeout=30):
        if isinstance(event, ApprovalRequested) and event.call_id == "a":
            handle.approve("a", by="bob", updated_arguments={"label": "changed"})
        elif isinstance(event, ApprovalRequested):
            handle.deny("d", "not this one", by="carol")
    document = valid(transcript.build(rt.ledger, handle.batch_id))
    changed, denied = document["calls"]
    assert changed["approval"]["arguments_changed"] is True
    assert denied["approval"]["status"] == "denied"
    assert denied["approval"]["answered_by"] == "carol"
    assert denied["approval"]["answer"] == "not this one"
    assert denied["result"]["status"] == "denied" and denied["attempts"] == []


def test_an_ended_batch_gives_the_same_document_and_digest_every_time(rt, workspace):
    handle = rt.submit(
        [{"id": "e", "name": "echo", "arguments": {"text": "hi"}}], workspace=workspace
    )
    handle.results(timeout=30)
    first = valid(transcript.build(rt.ledger, handle.batch_id))
    rt.cancel(handle.batch_id, by="late")  # after the end: changes nothing
    again = transcript.build(rt.ledger, handle.batch_id)
    assert first == again and transcript.digest(first) == transcript.digest(again)
    assert again["batch"]["cancelled_at"] is None


def test_an_open_batch_says_so(rt, workspace):
    handle = rt.submit(
        [{"id": "w", "name": "bump", "arguments": {"label": "w"}}],
        mode="default",
        workspace=workspace,
    )
    next(iter(handle.stream(timeout=30)))  # its approval is asked
    document = valid(transcript.build(rt.ledger, handle.batch_id))
    assert document["batch"]["state"] == "open" and document["batch"]["ended_at"] is None
    [call] = document["calls"]
    assert call["approval"]["status"] == "pending" and call["result"] is None
    assert document["totals"]["ended"] == 0


def test_a_provider_message_keeps_the_reply_it_got(rt, workspace):
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "echoing"},
            {"type": "tool_use", "id": "toolu_01", "name": "echo", "input": {"text": "hi"}},
        ],
    }
    handle = rt.submit_message(message, workspace=workspace)
    sent = handle.reply(timeout=30)
    document = valid(transcript.build(rt.ledger, handle.batch_id))
    assert document["batch"]["format"] == "anthropic"
    assert document["reply"] == {"format": "anthropic", "body": sent}


def test_no_such_batch_is_none_and_the_runtime_says_so(rt):
    assert transcript.build(rt.ledger, "nothing-here") is None
    with pytest.raises(InvalidBatch, match="no batch 'nothing-here'"):
        rt.transcript("nothing-here")


def test_the_runtime_gives_it_sealed_under_its_key(rt, workspace):
    handle = rt.submit(
        [{"id": "e", "name": "echo", "arguments": {"text": "hi"}}], workspace=workspace
    )
    handle.results(timeout=30)
    sealed = valid(rt.transcript(handle.batch_id))
    assert transcript.verify(sealed, KEY) == []


def test_the_seal_checks_out_and_any_edit_or_other_key_fails_it(rt, workspace):
    handle = rt.submit(
        [{"id": "e", "name": "echo", "arguments": {"text": "hi"}}], workspace=workspace
    )
    handle.results(timeout=30)
    sealed = valid(transcript.seal(transcript.build(rt.ledger, handle.batch_id), KEY))
    assert transcript.verify(sealed, KEY) == []
    edited = sealed | {"calls": [sealed["calls"][0] | {"tool": "shell"}]}
    assert any("digest" in p for p in transcript.verify(edited, KEY))
    assert any("HMAC" in p for p in transcript.verify(sealed, b"another key"))
    resealed_elsewhere = transcript.seal(edited, b"another key")
    assert transcript.verify(resealed_elsewhere, KEY) == [
        "the HMAC does not match: changed, or sealed under another key"
    ]
    assert transcript.verify({"schema": "x"}, KEY)


def test_each_attempt_shows_its_queue_wait_and_cpu_time(tmp_path):
    """A read, then two writes that run as a chain in one task: each step has
    its own queue wait (the next step's from the end of the one before)."""
    calls = [
        {"id": "r", "name": "burn", "arguments": {"label": "r"}},
        {"id": "w1", "name": "burn_write", "arguments": {"label": "w1"}},
        {"id": "w2", "name": "burn_write", "arguments": {"label": "w2"}},
    ]
    with memory_runtime(BURNING, workspace=tmp_path) as rt:
        handle = rt.submit(calls, mode="accept_edits", workspace=tmp_path)
        assert [r.status.value for r in handle.results(timeout=30)] == ["ok"] * 3
        document = valid(transcript.build(rt.ledger, handle.batch_id))
        taken = {m.call_id: m for m in rt._transport.taken}
    assert len(taken["w1"].then) == 1  # w2 went with w1 and was handed on
    for call in document["calls"]:
        [attempt] = call["attempts"]
        assert attempt["cpu_ms"] >= 45, (call["id"], attempt)  # 50 ms, less the clock's rounding
        assert attempt["queue_wait_ms"] >= 0, (call["id"], attempt)
