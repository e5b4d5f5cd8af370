"""A submit checked and fixed before anything is written, and a provider
message's calls with their turn's key (runtime/client/submission.py), on a
real SQLite ledger."""

from __future__ import annotations

import json

import pytest

from runtime.client.intake import keyed_id
from runtime.client.submission import submission, turn_of
from runtime.errors import InvalidBatch
from runtime.gate.policy import PolicySources
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools

CALLS = [{"id": "a", "name": "read_file", "arguments": {"path": "x"}}]


@pytest.fixture
def parts(tmp_path):
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"trusted_workspaces": [str(tmp_path)]}))
    settings = Settings(home=tmp_path / "home", user_settings_file=user)
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    yield {
        "policies": PolicySources(settings),
        "ledger": ledger,
        "registry": load_tools([], mcp_servers_file=None),
        "in_redis": True,
    }
    ledger.close()


def submitted(parts, tmp_path, **options):
    given = {"mode": "auto", "workspace": tmp_path, "on_error": None, "rules": None}
    given |= {"key": None, "conversation": None, "submitter": None} | options
    return submission(CALLS, **parts, **given)


def test_a_keyed_submit_gets_the_keys_batch_id_and_its_submitter(parts, tmp_path):
    found = submitted(parts, tmp_path, key="turn-1", submitter="alice")
    assert found.batch.id == keyed_id("turn-1")
    assert found.submitter == "alice" and found.policy is not None


def test_a_bad_name_is_refused_before_anything_is_written(parts, tmp_path):
    with pytest.raises(InvalidBatch, match="conversation"):
        submitted(parts, tmp_path, conversation="x" * 10_000)


def test_a_message_without_tool_calls_is_refused_and_one_with_them_is_keyed(parts, tmp_path):
    options: dict = {"workspace": str(tmp_path), "submitter": "alice"}
    with pytest.raises(InvalidBatch, match="no tool calls"):
        turn_of(parts["ledger"], {"role": "assistant", "content": "hi"}, "openai", options)
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        ],
    }
    turn = turn_of(parts["ledger"], message, "openai", options)
    assert [call.id for call in turn.calls] == ["c1"] and options["key"]
