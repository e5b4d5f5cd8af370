"""What a submit is given, turned into a `Batch` or refused before anything is
written (runtime/client/intake.py)."""

from __future__ import annotations

import pytest

from runtime.client.intake import MAX_CALL_ID, batch_from, check_name, keyed_id
from runtime.errors import InvalidBatch
from runtime.types import Mode


def test_calls_become_a_batch_in_a_resolved_workspace(tmp_path):
    batch = batch_from(
        [{"id": "a", "name": "read_file", "arguments": {"path": "x"}}],
        mode="auto",
        workspace=tmp_path / ".",
        on_error=None,
    )
    assert batch.mode is Mode.auto and batch.on_error == "stop"
    assert batch.workspace == str(tmp_path.resolve())


@pytest.mark.parametrize(
    ("calls", "said"),
    [
        ([], "no calls"),
        ([{"id": "a", "name": "x"}, {"id": "a", "name": "y"}], "duplicate call ids in batch: a"),
        ([{"name": "x"}], "call 0 of the batch is not a tool call"),
        ([{"id": "a" * (MAX_CALL_ID + 1), "name": "x"}], f"longer than {MAX_CALL_ID}"),
    ],
)
def test_a_batch_no_result_could_answer_is_refused(tmp_path, calls, said):
    with pytest.raises(InvalidBatch, match=said):
        batch_from(calls, mode=None, workspace=tmp_path, on_error=None)


def test_a_workspace_that_is_no_directory_is_refused(tmp_path):
    with pytest.raises(InvalidBatch, match="is not a directory"):
        batch_from([{"id": "a", "name": "x"}], mode=None, workspace=tmp_path / "no", on_error=None)


def test_names_are_bounded_and_keys_map_to_one_batch_id():
    check_name("conversation", "c-1")
    with pytest.raises(InvalidBatch, match="non-empty string"):
        check_name("submitter", "")
    assert keyed_id("k") == keyed_id("k") != keyed_id("j")
    assert keyed_id("k").startswith("k") and len(keyed_id("k")) == 32


def test_a_turn_key_names_its_scope_and_nothing_else_of_the_caller(tmp_path):
    from runtime.adapters import parse
    from runtime.client.intake import turn_key

    turn = parse({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x"}]})
    assert turn_key(turn, tmp_path, "submitter ann") == turn_key(turn, tmp_path, "submitter ann")
    assert turn_key(turn, tmp_path, "submitter ann") != turn_key(turn, tmp_path, "submitter ben")
    assert turn_key(turn, tmp_path, "gateway key a") != turn_key(
        turn, tmp_path / "a", "gateway key a"
    )


@pytest.mark.parametrize(
    ("call", "said"),
    [
        ({"id": "a\ud800", "name": "x"}, "the id of call 0"),
        ({"id": "a", "name": "x\udfff"}, "the tool name of call 0"),
    ],
)
def test_a_lone_surrogate_in_an_id_or_a_name_is_refused(tmp_path, call, said):
    with pytest.raises(InvalidBatch, match=f"{said} holds a lone surrogate"):
        batch_from([call], mode=None, workspace=tmp_path, on_error=None)
    with pytest.raises(InvalidBatch, match="the workspace holds a lone surrogate"):
        batch_from([{"id": "a", "name": "x"}], mode=None, workspace="/tmp/\ud800", on_error=None)
