"""Approve and remember through the real CLI and stack (runtime/cli/rules.py,
docs/architecture.md "Remembered rules"): `toolrun approve --remember` adds
an allow rule that the gate applies to later batches of its scope only,
`toolrun rules` lists it with who added it, and once revoked calls ask again."""

from __future__ import annotations

import re

import pytest

from runtime.types import ApprovalRequested, Status
from tests.support.cli import stack_env, toolrun
from tests.support.tools import marks


def bump(label):
    return [{"id": "w1", "name": "bump", "arguments": {"label": label}}]


def waits(handle) -> bool:
    """Whether the batch's one call waits for approval (True), or ends without asking."""
    for event in handle.stream(timeout=60):
        if isinstance(event, ApprovalRequested):
            return True
    return False


@pytest.fixture
def cli(stack, user_settings):
    env = stack_env(stack, user_settings)

    def run(*args, code=0):
        done = toolrun(*args, env=env)
        assert done.returncode == code, (done.stdout, done.stderr)
        return done.stdout if code == 0 else done.stderr

    return run


def test_a_remembered_rule_allows_later_calls_of_its_workspace_until_revoked(
    runtime, workspace, tmp_path, cli
):
    first = runtime.submit(bump("asked"), mode="default", workspace=workspace)
    assert waits(first)
    said = cli("approve", "w1", "--batch", first.batch_id, "--remember", "workspace", "--by", "ada")
    rule_id = re.search(r"remembered rule (\d+): allow bump for workspace (\S+)", said)
    assert rule_id and rule_id.group(2) == str(workspace.resolve()), said
    assert first.results(timeout=60)[0].status is Status.ok

    again = runtime.submit(bump("remembered"), mode="default", workspace=workspace)
    assert not waits(again) and again.results(timeout=60)[0].status is Status.ok
    decision = next(e for e in runtime.ledger.events(again.batch_id) if e.kind == "decision")
    assert (decision.effect, decision.rule) == ("allow", "bump")
    assert decision.source == f"remembered #{rule_id.group(1)} by ada"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = runtime.submit(bump("other workspace"), mode="default", workspace=elsewhere)
    assert waits(other)  # a workspace's rule is that workspace's alone
    assert runtime.deny(other.batch_id, "w1", "not here", by="test")

    listed = cli("rules")
    line = next(line for line in listed.splitlines() if line.startswith(rule_id.group(1) + " "))
    assert "allow bump" in line and str(workspace.resolve()) in line and "added by ada" in line

    assert "revoked rule" in cli("rules", "revoke", rule_id.group(1), "--by", "bea")
    assert "revoked already" in cli("rules", "revoke", rule_id.group(1), code=1)
    assert not [line for line in cli("rules").splitlines() if line.split()[0] == rule_id.group(1)]
    assert "revoked by bea" in cli("rules", "--all")
    later = runtime.submit(bump("after revoke"), mode="default", workspace=workspace)
    assert waits(later)
    assert runtime.deny(later.batch_id, "w1", "revoked", by="test")
    assert [m["label"] for m in marks(workspace, "effects")] == ["asked", "remembered"]


def test_a_rule_remembered_for_a_submitter_follows_it_and_must_cover_the_call(
    runtime, workspace, tmp_path, cli
):
    def write(path):
        return [{"id": "w1", "name": "write_file", "arguments": {"path": path, "content": "x"}}]

    first = runtime.submit(write("a.md"), mode="default", workspace=workspace, submitter="remy")
    assert waits(first)
    refused = cli(
        "approve", "w1", "--batch", first.batch_id, "--remember", "submitter",
        "--rule", "write_file(*.txt)", code=2,
    )  # fmt: skip
    assert "does not cover the call it answers" in refused
    said = cli(
        "approve", "w1", "--batch", first.batch_id, "--remember", "submitter",
        "--rule", "write_file(*.md)",
    )  # fmt: skip
    assert "allow write_file(*.md) for submitter remy" in said
    assert first.results(timeout=60)[0].status is Status.ok

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    mine = runtime.submit(write("b.md"), mode="default", workspace=elsewhere, submitter="remy")
    assert not waits(mine) and (elsewhere / "b.md").read_text() == "x"
    txt = runtime.submit(write("c.txt"), mode="default", workspace=elsewhere, submitter="remy")
    assert waits(txt)  # the rule covers *.md only
    assert runtime.deny(txt.batch_id, "w1", "no", by="test")
    theirs = runtime.submit(write("d.md"), mode="default", workspace=elsewhere, submitter="sam")
    assert waits(theirs)  # another submitter's batches are not
    assert runtime.deny(theirs.batch_id, "w1", "no", by="test")
    rule_id = re.search(r"remembered rule (\d+)", said).group(1)
    cli("rules", "revoke", rule_id)
