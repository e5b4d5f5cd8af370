"""The reviewer's escapes, through the real stack (Redis, workers, the shell tool):
flags an allowed `git diff` must not carry, writes to git's configuration, and a
hard link to a file outside the workspace (docs/architecture.md, "The permission
gate")."""

import os
import shutil
import subprocess

import pytest

from runtime.types import ApprovalRequested, Status

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git on PATH")
GIT_DIFF = {"allow": ["shell(git diff *)"]}
FSMONITOR = '[core]\n\tfsmonitor = "touch fsmonitor-ran; false"\n'


def call(call_id, name, **arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture
def repo(workspace):
    """A git repository with one tracked file changed since its commit."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=workspace, check=True)
    (workspace / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "a.txt"], cwd=workspace, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=workspace, check=True)
    (workspace / "a.txt").write_text("two\n")
    return workspace


def notice_then_deny(handle, call_id):
    """Wait for the call's approval notice, answer no, and return the notice and result."""
    notice = next(
        event
        for event in handle.stream(timeout=60)
        if isinstance(event, ApprovalRequested) and event.call_id == call_id
    )
    assert handle.deny(call_id, "not this one", by="test")
    [result] = handle.results(timeout=60)
    return notice, result


def test_git_diff_output_outside_is_not_allowed_by_the_rule_and_writes_nothing(runtime, repo):
    outside = repo.parent / "outside-diff.txt"
    command = f"git diff --output={outside} HEAD"
    handle = runtime.submit(
        [call("d", "shell", command=command)], mode="accept_edits", workspace=repo, rules=GIT_DIFF
    )
    notice, result = notice_then_deny(handle, "d")
    assert f"'--output={outside}'" in notice.reason and "outside the workspace" in notice.reason
    assert result.status is Status.denied
    decision = next(e for e in runtime.ledger.events(handle.batch_id, "d") if e.kind == "decision")
    assert (decision.effect, decision.rule) == ("ask", "mode:accept_edits")
    handle = runtime.submit(
        [call("d", "shell", command=f"git diff --output {outside} HEAD")],
        mode="auto",
        workspace=repo,
        rules=GIT_DIFF,
    )
    [result] = handle.results(timeout=60)
    assert result.status is Status.denied and "'--output'" in result.model_message
    assert not outside.exists()


def test_a_file_named_like_a_flag_is_not_injected_through_the_glob(runtime, repo):
    (repo / "--output=x").write_text("")
    handle = runtime.submit(
        [call("d", "shell", command="git diff *")], mode="auto", workspace=repo, rules=GIT_DIFF
    )
    [result] = handle.results(timeout=60)
    assert result.status is Status.denied and "'--output=x'" in result.model_message
    assert not (repo / "x").exists()


def test_git_config_on_the_command_line_runs_nothing(runtime, repo):
    command = "git -c core.fsmonitor='touch fsmonitor-ran; false' diff"
    handle = runtime.submit(
        [call("d", "shell", command=command)],
        mode="auto",
        workspace=repo,
        rules={"allow": ["shell(git *)"]},
    )
    [result] = handle.results(timeout=60)
    assert result.status is Status.denied and "'-c'" in result.model_message
    assert not (repo / "fsmonitor-ran").exists()


def test_writing_git_s_config_asks_in_accept_edits_and_is_denied_in_auto(runtime, repo):
    before = (repo / ".git" / "config").read_text()
    writes = {"allow": ["write_file", "shell(git diff *)"]}
    batch = [
        call("w", "write_file", path=".git/config", content=FSMONITOR),
        call("d", "shell", command="git diff"),
    ]
    handle = runtime.submit(batch, mode="accept_edits", workspace=repo, rules=writes)
    notice = next(
        event for event in handle.stream(timeout=60) if isinstance(event, ApprovalRequested)
    )
    assert notice.call_id == "w" and "git's own directory" in notice.reason
    assert handle.deny("w", "no", by="test")
    results = handle.results(timeout=60)
    assert [r.status for r in results] == [Status.denied, Status.skipped]
    handle = runtime.submit(batch, mode="auto", workspace=repo, rules=writes)
    results = handle.results(timeout=60)
    assert [r.status for r in results] == [Status.denied, Status.skipped]
    assert "approval" in results[0].model_message
    assert (repo / ".git" / "config").read_text() == before
    assert not (repo / "fsmonitor-ran").exists()


def test_bypass_writes_git_s_config(runtime, repo):
    handle = runtime.submit(
        [call("w", "write_file", path="sub/../.git/config", content=FSMONITOR)],
        mode="bypass",
        workspace=repo,
    )
    [result] = handle.results(timeout=60)
    assert result.status is Status.ok
    assert (repo / ".git" / "config").read_text() == FSMONITOR


def test_a_hard_link_to_a_file_outside_is_not_read(runtime, workspace):
    secret = workspace.parent / "outside-secret.txt"
    secret.write_text("outside-only 9431\n")
    os.link(secret, workspace / "linked.txt")
    batch = [
        call("r", "read_file", path="linked.txt"),
        call("s", "search_files", pattern="outside-only", path="."),
    ]
    results = runtime.submit(batch, mode="auto", workspace=workspace).results(timeout=60)
    assert results[0].status is Status.denied and "hard links" in results[0].model_message
    assert results[1].status is Status.ok and results[1].content["matches"] == []
    assert all("9431" not in r.model_message for r in results)
