"""The turns of a conversation: each batch records the one before it and that
turn's digest, so a turn removed or changed afterwards is found, in exported
files and in the ledger itself."""

from __future__ import annotations

import sqlite3

import pytest

from runtime import transcript
from runtime.errors import InvalidBatch
from runtime.transcript import conversation as conversations
from runtime.transcript.integrity import links
from tests.support.transcripts import valid
from tests.transcript.conftest import KEY


def _turns(rt, workspace, count, conversation="c-17"):
    ids = []
    for number in range(count):
        handle = rt.submit(
            [{"id": f"t{number}", "name": "echo", "arguments": {"text": f"turn {number}"}}],
            workspace=workspace,
            conversation=conversation,
        )
        handle.results(timeout=30)
        ids.append(handle.batch_id)
    return ids


def _sealed(rt, batch_id):
    return valid(transcript.seal(transcript.build(rt.ledger, batch_id), KEY))


def test_each_turn_links_to_the_digest_of_the_one_before(rt, workspace):
    ids = _turns(rt, workspace, 3)
    documents = [_sealed(rt, batch_id) for batch_id in ids]
    assert documents[0]["conversation"] == {"id": "c-17", "previous": None}
    for before, after in zip(documents, documents[1:], strict=False):
        assert after["conversation"]["previous"] == {
            "batch_id": before["batch"]["id"],
            "digest": before["integrity"]["digest"],
        }
    assert links(documents) == []
    assert conversations.check(rt.ledger, "c-17") == []


def test_a_turn_left_out_or_edited_in_the_files_is_found(rt, workspace):
    first, second, third = (_sealed(rt, b) for b in _turns(rt, workspace, 3))
    [gap] = links([first, third])
    assert "is missing" in gap and second["batch"]["id"] in gap
    edited = transcript.seal(second | {"totals": second["totals"] | {"calls": 9}}, KEY)
    assert transcript.verify(edited, KEY) == []  # resealed by someone holding the key...
    [found] = links([first, edited, third])  # ...still breaks the next turn's link
    assert "is not the one it followed" in found
    assert links([second, third]) == []  # a run of turns may start anywhere


def test_a_turn_deleted_or_changed_in_the_ledger_is_found(rt, workspace, tmp_path):
    first, second, third = _turns(rt, workspace, 3)
    database = tmp_path / "ledger.db"
    with sqlite3.connect(database) as db:  # what someone with the database file could do
        db.execute("UPDATE toolrun_call SET arguments = '{}' WHERE batch_id = ?", (first,))
    [changed] = conversations.check(rt.ledger, "c-17")
    assert second in changed and first in changed and "was changed" in changed
    with sqlite3.connect(database) as db:
        for table in ("toolrun_batch", "toolrun_call", "toolrun_event", "toolrun_end"):
            column = "id" if table == "toolrun_batch" else "batch_id"
            db.execute(f"DELETE FROM {table} WHERE {column} = ?", (second,))  # noqa: S608
    problems = conversations.check(rt.ledger, "c-17")
    assert any(second in p and "missing" in p for p in problems)


def test_conversations_do_not_mix_and_names_are_checked(rt, workspace):
    _turns(rt, workspace, 1, conversation="c-a")
    [other] = _turns(rt, workspace, 1, conversation="c-b")
    assert _sealed(rt, other)["conversation"]["previous"] is None
    with pytest.raises(InvalidBatch, match="conversation"):
        rt.submit(
            [{"id": "a", "name": "list_dir", "arguments": {}}], workspace=workspace, conversation=""
        )
    assert conversations.check(rt.ledger, "never") == [
        "no batch of conversation 'never' in the ledger"
    ]
