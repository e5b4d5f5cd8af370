"""Transcripts of batches that ran on real workers (the session's stack:
redis-server and celery worker processes), read and checked with the
installed `toolrun` in subprocesses, as a user would."""

from __future__ import annotations

import json
import re

import pytest

from runtime import transcript
from runtime.types import ApprovalRequested
from tests.conftest import runtime_on
from tests.support.cli import stack_env, toolrun
from tests.support.transcripts import valid

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def turns(stack, user_settings, tmp_path_factory):
    """Three turns of conversation c-17: reads, a write that asks and is
    approved, a failing call; each one after the one before has ended."""
    space = tmp_path_factory.mktemp("transcript-space")
    (space / "a.txt").write_text("alpha\n")
    batches = [
        [
            {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "e1", "name": "echo", "arguments": {"text": "hello"}},
        ],
        [{"id": "w1", "name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}],
        [{"id": "x1", "name": "explode", "arguments": {"message": "boom"}}],
    ]
    rt = runtime_on(stack, user_settings)
    ids = []
    try:
        for calls in batches:
            handle = rt.submit(calls, workspace=space, conversation="c-17", timeout=60)
            for event in handle.stream(timeout=60):
                if isinstance(event, ApprovalRequested):
                    handle.approve(event.call_id, by="bob")
            ids.append(handle.batch_id)
    finally:
        rt.close()
    return ids


# A bash loop that burns CPU in bash itself, then bash's own account of it.
BUSY = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; times"


@pytest.fixture(scope="module")
def shell_run(stack, user_settings, tmp_path_factory):
    """One shell call, approved, on the stack's effects worker: its batch id
    and the CPU milliseconds bash said it used (user and system)."""
    space = tmp_path_factory.mktemp("transcript-shell")
    rt = runtime_on(stack, user_settings)
    try:
        handle = rt.submit(
            [{"id": "s1", "name": "shell", "arguments": {"command": BUSY}}],
            workspace=space,
            timeout=60,
        )
        for event in handle.stream(timeout=60):
            if isinstance(event, ApprovalRequested):
                handle.approve(event.call_id, by="bob")
        [result] = handle.results(timeout=60)
    finally:
        rt.close()
    assert result.ok, result.model_message
    user, system = re.findall(r"(\d+)m([\d.]+)s", result.content["stdout"])[:2]
    return handle.batch_id, sum(float(m) * 60_000 + float(s) * 1000 for m, s in (user, system))


@pytest.fixture
def env(stack, user_settings):
    return stack_env(stack, user_settings)


def _export(batch_id, env, folder, format="json"):
    path = folder / f"{batch_id}.{format}"
    done = toolrun("transcript", batch_id, "--format", format, "--output", str(path), env=env)
    assert done.returncode == 0, done.stderr
    return path


def test_the_cli_writes_each_turn_and_verifies_the_chain(turns, env, tmp_path, stack):
    files = [_export(batch_id, env, tmp_path) for batch_id in turns]
    documents = [valid(json.loads(f.read_text())) for f in files]
    reads, write, failed = documents
    assert [c["id"] for c in reads["calls"]] == ["r1", "e1"]
    workers = {a["worker"] for d in documents for c in d["calls"] for a in c["attempts"]}
    assert all(w and "@" in w for w in workers), workers  # celery workers' own names
    for attempt in (a for d in documents for c in d["calls"] for a in c["attempts"]):
        assert attempt["queue_wait_ms"] >= 0 and attempt["cpu_ms"] >= 0, attempt
    assert write["calls"][0]["approval"]["answered_by"] == "bob"
    assert write["calls"][0]["decision"]["effect"] == "ask"
    assert failed["calls"][0]["result"]["status"] == "error"
    assert write["conversation"]["previous"]["digest"] == reads["integrity"]["digest"]
    assert transcript.verify(reads, stack.signing_key.encode()) == []

    done = toolrun("transcript", "verify", *map(str, files), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 transcript(s): digests, HMACs and links hold" in done.stdout
    done = toolrun("transcript", "verify", "--conversation", "c-17", env=env)
    assert done.returncode == 0 and "3 turn(s), every link holds" in done.stdout, done.stdout


def test_a_removed_or_edited_turn_fails_verify(turns, env, tmp_path):
    first, second, third = (_export(batch_id, env, tmp_path) for batch_id in turns)
    done = toolrun("transcript", "verify", str(first), str(third), env=env)
    assert done.returncode == 1 and "is missing" in done.stdout, done.stdout
    edited = json.loads(second.read_text())
    edited["calls"][0]["approval"]["answered_by"] = "mallory"
    second.write_text(json.dumps(edited))
    done = toolrun("transcript", "verify", str(first), str(second), str(third), env=env)
    assert done.returncode == 1, done.stdout
    assert "digest does not match" in done.stdout and "not the one it followed" in done.stdout


def test_a_shell_call_s_attempt_counts_bash_s_cpu_time(shell_run, env, tmp_path):
    """The pool process waited for bash: bash's CPU time is the attempt's too."""
    batch_id, bash_ms = shell_run
    assert bash_ms >= 20, bash_ms  # the loop did burn CPU in bash, not in the worker
    [call] = valid(json.loads(_export(batch_id, env, tmp_path).read_text()))["calls"]
    [attempt] = call["attempts"]
    assert "@" in attempt["worker"] and attempt["queue_wait_ms"] >= 0
    # Both are the kernel's counts, printed to the millisecond: one of slack.
    assert attempt["cpu_ms"] >= bash_ms - 1, (attempt, bash_ms)


@pytest.mark.parametrize("format", ["jsonl", "md", "html"])
def test_every_format_from_the_cli(turns, env, tmp_path, format):
    text = _export(turns[0], env, tmp_path, format).read_text()
    if format == "jsonl":
        document = valid(transcript.parse(text))
        assert [c["id"] for c in document["calls"]] == ["r1", "e1"]
    else:
        assert "`r1`" in text or "<code>r1</code>" in text
        assert "e1" in text


def test_bad_input_is_one_line_and_no_traceback(env, tmp_path):
    done = toolrun("transcript", "no-such-batch", env=env)
    assert done.returncode == 2 and "no batch 'no-such-batch'" in done.stderr
    assert "Traceback" not in done.stderr
    done = toolrun("transcript", "x", "--format", "pdf", env=env)
    assert done.returncode == 2 and "unknown format" in done.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    done = toolrun("transcript", "verify", str(junk), env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    done = toolrun("transcript", "verify", str(tmp_path / "absent.json"), env=env)
    assert done.returncode == 2 and "cannot read" in done.stderr


def test_a_signed_task_message_is_no_transcript_and_a_transcript_signs_no_message(
    turns, stack, user_settings, env, tmp_path
):
    """Task messages and transcripts are signed under keys of their own
    (docs/architecture.md, "Secrets"): a message taken from a batch's plan,
    dressed as a transcript, fails `toolrun transcript verify`, and a
    transcript's HMAC does not sign a task message."""
    from runtime.transcript import integrity
    from runtime.transport import signing

    space = tmp_path / "space"
    space.mkdir()
    rt = runtime_on(stack, user_settings)
    try:
        calls = [{"id": "w1", "name": "write_file", "arguments": {"path": "b", "content": "b"}}]
        handle = rt.submit(calls, workspace=space, mode="default", timeout=60)
        assert isinstance(next(iter(handle.stream(notices=True, timeout=60))), ApprovalRequested)
        message = rt.ledger.plan(handle.batch_id)["calls"]["w1"]["message"]
        handle.cancel()
    finally:
        rt.close()
    body = json.loads(signing.canonical(message))
    forged = body | {
        "integrity": {
            "algorithm": "sha256",
            "digest": integrity.digest(body),
            "hmac": "hmac-sha256:" + message["signature"],
        }
    }
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged))
    done = toolrun("transcript", "verify", str(path), env=env)
    assert done.returncode == 1, done.stdout
    assert "HMAC does not match" in done.stdout, done.stdout

    sealed = json.loads(_export(turns[0], env, tmp_path).read_text())
    mac = sealed.pop("integrity")["hmac"].removeprefix("hmac-sha256:")
    assert not signing.verify(sealed | {signing.FIELD: mac}, stack.signing_key.encode())


def test_a_transcript_that_gives_a_key_twice_fails_verify(turns, env, tmp_path):
    """Issue 40: a forged `calls` first and the sealed one after it passed
    verify (a JSON reader keeps the last); a key given twice is refused."""
    sealed = _export(turns[0], env, tmp_path).read_text()
    forged = '{"calls": [{"id": "r1", "result": "forged"}],\n' + sealed.lstrip()[1:]
    path = tmp_path / "twice.json"
    path.write_text(forged)
    done = toolrun("transcript", "verify", str(path), env=env)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stdout
    assert "'calls' is given twice" in done.stdout + done.stderr
    lines = _export(turns[0], env, tmp_path, "jsonl").read_text().splitlines()
    lines[-1] = lines[-1][:-1] + ', "calls": []}'  # the end line's calls would replace them
    path.write_text("\n".join(lines) + "\n")
    done = toolrun("transcript", "verify", str(path), env=env)
    assert done.returncode != 0 and "'calls' is given twice" in done.stdout + done.stderr
