"""A write's change in a transcript is the one the call made: with the
arguments an approver gave, where they changed them; a change refused or
denied is shown as asked for, never as a green diff; and a call's `ms` is what
its attempts add up to."""

from __future__ import annotations

import pytest

from runtime import transcript
from runtime.types import ApprovalRequested
from tests.support.transcripts import valid


@pytest.fixture
def answered(rt, workspace):
    """`a.md` approved with other content, `b.md` denied, `c.md` approved as asked."""
    handle = rt.submit(
        [
            {"id": "a", "name": "write_file", "arguments": {"path": "a.md", "content": "model"}},
            {"id": "b", "name": "write_file", "arguments": {"path": "b.md", "content": "no"}},
            {"id": "c", "name": "write_file", "arguments": {"path": "c.md", "content": "same"}},
        ],
        mode="default",
        workspace=workspace,
        on_error="continue",
    )
    for event in handle.stream(timeout=30):
        if not isinstance(event, ApprovalRequested):
            continue
        if event.call_id == "a":
            given = {"path": "a.md", "content": "approved\ntext"}
            handle.approve("a", by="bob", updated_arguments=given)
        elif event.call_id == "b":
            handle.deny("b", "not that file", by="carol")
        else:
            handle.approve("c", by="bob")
    return valid(transcript.build(rt.ledger, handle.batch_id))


def test_the_json_holds_the_arguments_the_approver_gave(answered, workspace):
    edited, denied, kept = answered["calls"]
    assert (workspace / "a.md").read_text() == "approved\ntext"
    assert edited["approval"]["arguments"] == {"path": "a.md", "content": "approved\ntext"}
    assert edited["arguments"] == {"path": "a.md", "content": "model"}  # what the model asked
    assert "arguments" not in denied["approval"] and "arguments" not in kept["approval"]


def test_markdown_shows_the_approved_arguments_and_the_diff_of_what_was_written(answered):
    text = transcript.render(answered, "md")
    assert "Change to `a.md`:\n\n```diff\n+ approved\n+ text\n```" in text
    assert "```diff\n+ model\n```" not in text
    assert "Arguments the call ran with, as approved (redacted):" in text
    assert '"content": "approved\\ntext"' in text
    assert "Change to `c.md`:\n\n```diff\n+ same\n```" in text


def test_a_denied_write_is_no_green_diff(answered, workspace):
    assert not (workspace / "b.md").exists()
    md = transcript.render(answered, "md")
    assert "```diff\n+ no\n```" not in md
    asked = "Change asked for `b.md` (not made: the call ended denied before it ran):"
    assert f"{asked}\n\n```text\n+ no\n```" in md
    html = transcript.render(answered, "html")
    assert '<span class="add">+ no</span>' not in html
    assert '<span class="asked">+ no</span>' in html
    assert '<span class="add">+ approved</span>' in html
    assert "arguments as approved" in html


def test_the_ms_column_is_the_sum_of_the_attempts(answered):
    md = transcript.render(answered, "md")
    rows = {line.split(" | ")[1]: line for line in md.splitlines() if line.startswith("| ")}
    for call in answered["calls"]:
        cell = rows[f"`{call['id']}`"].rstrip(" |").rsplit(" | ", 1)[1]
        if call["attempts"]:
            assert cell == str(round(sum(a["wall_ms"] for a in call["attempts"]), 3))
        else:
            assert cell == str(call["result"]["duration_ms"])
