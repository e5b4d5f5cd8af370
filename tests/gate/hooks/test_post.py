"""Post hooks on a formatted result: a note the model reads, naming the hook,
a mark on the screen summary, a row for each answer, and a failure that leaves
the result as it was."""

from __future__ import annotations

from runtime.gate.hooks import post
from runtime.gate.hooks.declaration import Hook
from runtime.redaction.redactor import BUILT_IN
from runtime.types import CallMessage, Status, ToolResult
from tests.support.messages import message


def note(request):
    assert request["result"]["status"] == "ok" and request["event"] == "post_tool_use"
    return {"note": "looks fine", "mark": "reviewed"}


def crash(request):
    raise RuntimeError("down")


def hook(function: str, **options) -> Hook:
    return Hook(function, "post", "python", f"{__name__}:{function}", "org", "org.json", **options)


def noted(tmp_path, *hooks, tool="echo"):
    sent = CallMessage.model_validate(message("c1", tool, {"text": "x"}, workspace=tmp_path))
    result = ToolResult(call_id="c1", tool=tool, status=Status.ok, model_message="x", summary="x")
    rows = []
    found = post.after(result, sent, hooks, key=b"k", redactor=BUILT_IN, record=rows.append)
    return found, rows


def test_a_note_follows_the_result_and_a_mark_the_summary(tmp_path):
    found, (asked,) = noted(tmp_path, hook("note"))
    assert found.model_message == "x\n\n[note from hook 'note': looks fine]"
    assert found.summary == "x [marked 'reviewed' by hook 'note']"
    assert asked.fields()["detail"]["mark"] == "reviewed"


def test_a_failing_post_hook_leaves_the_result_and_is_recorded(tmp_path):
    found, (asked,) = noted(tmp_path, hook("crash"))
    assert found.model_message == "x" and "RuntimeError: down" in asked.failure


def test_a_post_hook_sees_only_its_tools_and_pre_hooks_are_not_asked(tmp_path):
    pre = Hook("note", "pre", "python", f"{__name__}:note", "org", "org.json")
    found, rows = noted(tmp_path, hook("note", tools=["bump"]), pre)
    assert found.model_message == "x" and rows == []


def test_with_no_time_left_a_post_hook_is_not_asked_and_its_row_says_so(tmp_path):
    sent = CallMessage.model_validate(message("c1", "echo", {"text": "x"}, workspace=tmp_path))
    result = ToolResult(call_id="c1", tool="echo", status=Status.ok, model_message="x", summary="x")
    rows = []
    found = post.after(
        result, sent, (hook("note"),), key=b"k", redactor=BUILT_IN, record=rows.append, seconds=0
    )
    assert found == result and "no time left" in rows[0].failure
