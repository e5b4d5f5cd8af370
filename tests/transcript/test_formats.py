"""A transcript as JSON, JSON Lines, Markdown and HTML: JSON Lines reads back
as the same document (same digest), and the text formats show every call."""

from __future__ import annotations

import json
import re

import pytest

from runtime import transcript
from runtime.errors import InvalidBatch
from runtime.types import ApprovalRequested
from tests.support.transcripts import valid
from tests.transcript.conftest import KEY


@pytest.fixture
def sealed(rt, workspace):
    handle = rt.submit(
        [
            {"id": "r|1", "name": "echo", "arguments": {"text": "<b>not bold</b> | pipe"}},
            {"id": "w1", "name": "bump", "arguments": {"label": "w"}},
            {"id": "x1", "name": "explode", "arguments": {"message": "boom"}},
        ],
        mode="default",
        workspace=workspace,
        on_error="continue",
    )
    for event in handle.stream(timeout=30):
        if isinstance(event, ApprovalRequested):
            handle.approve(event.call_id, by="bob")
    return valid(transcript.seal(transcript.build(rt.ledger, handle.batch_id), KEY))


@pytest.mark.parametrize("format", ["json", "jsonl"])
def test_json_and_json_lines_read_back_as_the_same_document(sealed, format):
    text = transcript.render(sealed, format)
    back = valid(transcript.parse(text))
    assert back == sealed and transcript.verify(back, KEY) == []


def test_json_lines_is_a_head_one_line_per_call_and_an_end(sealed):
    lines = [json.loads(line) for line in transcript.render(sealed, "jsonl").splitlines()]
    assert [line["record"] for line in lines] == ["head", "call", "call", "call", "end"]
    assert lines[0]["schema"] == "toolrun.transcript/1"
    assert lines[-1]["integrity"] == sealed["integrity"]


def test_markdown_shows_every_call_in_its_table_and_in_full(sealed):
    text = transcript.render(sealed, "md")
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == 3
    assert "`r\\|1`" in rows[0]  # a pipe in an id does not break the table
    assert "approved by bob" in rows[1] and "| error |" in rows[2]
    for call in sealed["calls"]:
        assert f"`{call['id']}`: {call['result']['status']}" in text
    assert sealed["integrity"]["digest"] in text


def test_html_is_one_page_with_a_row_per_call_and_nothing_from_outside(sealed):
    text = transcript.render(sealed, "html")
    assert text.count('<tr class="call"') == 3
    assert "<b>not bold</b>" not in text and "&lt;b&gt;not bold&lt;/b&gt;" in text
    assert not re.search(r"<(script|link|img|iframe)\b|src=|href=|url\(", text)


def test_a_write_shows_its_change_as_diff_lines_in_markdown(rt, workspace):
    handle = rt.submit(
        [
            {"id": "w", "name": "write_file", "arguments": {"path": "n.md", "content": "a\nb"}},
            {
                "id": "e",
                "name": "edit_file",
                "arguments": {"path": "n.md", "old_string": "a", "new_string": "c"},
            },
        ],
        mode="accept_edits",
        workspace=workspace,
    )
    handle.results(timeout=30)
    text = transcript.render(valid(transcript.build(rt.ledger, handle.batch_id)), "md")
    assert "Change to `n.md`:\n\n```diff\n+ a\n+ b\n```" in text
    assert "```diff\n- a\n+ c\n```" in text


def test_text_that_is_no_transcript_is_a_clear_error():
    for text in ["", "not json", '{"record": "call"}\n', "[1, 2]"]:
        with pytest.raises(InvalidBatch):
            transcript.parse(text)
    with pytest.raises(InvalidBatch, match="format"):
        transcript.render({}, "pdf")


def test_markdown_and_html_show_each_attempt_s_queue_wait_and_cpu_time(sealed):
    echo = sealed["calls"][0]
    [attempt] = echo["attempts"]
    shown = f"(queued {attempt['queue_wait_ms']:.0f} ms, {attempt['cpu_ms']:.0f} ms CPU)"
    for format in ("md", "html"):
        assert shown in transcript.render(sealed, format), format


def test_a_key_given_twice_is_refused_in_json_and_json_lines(sealed):
    """Issue 40: a reader keeps one of two `calls` and a person may read the
    other; nested objects are held to it too."""
    text = transcript.render(sealed, "json")
    with pytest.raises(InvalidBatch, match="'calls' is given twice"):
        transcript.parse('{"calls": [],' + text.lstrip()[1:])
    with pytest.raises(InvalidBatch, match="'id' is given twice"):
        transcript.parse(text.replace('"id": ', '"id": "x", "id": ', 1))
    lines = transcript.render(sealed, "jsonl").splitlines()
    head = json.loads(lines[0]) | {"totals": {}}  # the end line gives totals too
    with pytest.raises(InvalidBatch, match="'totals' is given twice"):
        transcript.parse("\n".join([json.dumps(head), *lines[1:]]))
    assert transcript.parse(text) == transcript.parse("\n".join(lines))
