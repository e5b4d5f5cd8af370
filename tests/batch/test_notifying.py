"""Approval notifications through the real stack (docs/architecture.md,
"Approval notifications"): a receiver on 127.0.0.1 is told once per waiting
call and notifier, whichever process asked (the submitter, a worker) and
however many advance the batch, retried after a 500, with a body signed
under the key derived for notifications."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from runtime import config
from runtime.keyring import Purpose, derived
from runtime.types import ApprovalRequested, Status
from tests.conftest import embedded_stack, runtime_on
from tests.integration.test_secrets import ARG_SECRET
from tests.support.cli import stack_env, toolrun
from tests.support.waiting import wait_for
from tests.support.webhooks import Receiver

GATEWAY = "https://toolrun.example.com"


@pytest.fixture(scope="module")
def receiver():
    with Receiver(failures=1) as running:
        yield running


@pytest.fixture(scope="module")
def policy(tmp_path_factory, receiver):
    path = tmp_path_factory.mktemp("org") / "policy.json"
    hooks = [
        {"name": "hook", "url": f"{receiver.url}/hook", "gateway_url": GATEWAY},
        {"name": "chat", "url": f"{receiver.url}/chat", "format": "slack"},
    ]
    path.write_text(json.dumps({"notifications": hooks}))
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory, policy):
    with embedded_stack(tmp_path_factory.mktemp("notify-home"), policy_file=policy) as record:
        yield record


def notice(stream, call_id):
    for event in stream:
        if isinstance(event, ApprovalRequested) and event.call_id == call_id:
            return event
    raise AssertionError(f"no approval notice for {call_id}")


def verified(key: bytes, own: bytes, request) -> dict:
    """`own`: the key `toolrun notifications key` printed, as a receiver holds it."""
    assert own == derived(key, Purpose.notification)
    timestamp = request.headers["x-toolrun-timestamp"]
    expected = hmac.new(own, timestamp.encode() + b"." + request.body, hashlib.sha256)
    assert hmac.compare_digest(
        request.headers["x-toolrun-signature"], "sha256=" + expected.hexdigest()
    )
    forged = hmac.new(key, timestamp.encode() + b"." + request.body, hashlib.sha256)
    assert request.headers["x-toolrun-signature"] != "sha256=" + forged.hexdigest()
    return json.loads(request.body)


def notified_rows(ledger, batch_id, count):
    def rows():
        found = [e for e in ledger.events(batch_id) if e.kind == "approval_notified"]
        return found if len(found) >= count else None

    return wait_for(rows, 60, f"{count} approval_notified rows")


def test_each_notifier_is_told_once_per_waiting_call_signed_and_retried(
    stack, policy, receiver, user_settings, workspace
):
    runtime = runtime_on(stack, user_settings, policy_file=policy)
    other = runtime_on(stack, user_settings, policy_file=policy)  # a second client
    key = config.signing_key(runtime.settings)
    try:
        calls = [
            {
                "id": "w1",
                "name": "write_file",
                "arguments": {"path": "notes.md", "content": f"token {ARG_SECRET}\nsecond line"},
            },
            {"id": "w2", "name": "bump", "arguments": {"label": "later"}},
        ]
        handle = runtime.submit(calls, mode="default", workspace=workspace)
        stream = handle.stream(timeout=60)
        notice(stream, "w1")
        for _ in range(3):  # other processes carrying the batch on ask nobody again
            other._services.advancer.advance(handle.batch_id)
        first = receiver.wait_for(2)
        # Answered from another process; the worker that ends w1 asks for w2.
        env = {**stack_env(stack, user_settings), "TOOLRUN_POLICY_FILE": str(policy)}
        done = toolrun("approve", "w1", "--batch", handle.batch_id, env=env)
        assert done.returncode == 0, done.stderr
        notice(stream, "w2")
        both = receiver.wait_for(4)
        assert runtime.deny(handle.batch_id, "w2", "not now", by="test")
        results = handle.results(timeout=60)
        assert [r.status for r in results] == [Status.ok, Status.denied]
        rows = notified_rows(runtime.ledger, handle.batch_id, 4)
        printed = toolrun("notifications", "key", env=env)
        listed = toolrun("notifications", "list", env=env)
    finally:
        runtime.close()
        other.close()

    # Exactly one delivery per waiting call and notifier, each refused once, then taken.
    deliveries = sorted(r.headers["x-toolrun-delivery"] for r in receiver.requests)
    assert deliveries == sorted(
        f"{handle.batch_id}/{call}/{name}"
        for call in ("w1", "w2")
        for name in ("hook", "chat")
        for _ in range(2)
    )
    assert [r.answered for r in receiver.requests].count(500) == 4
    assert {r.path for r in first} == {"/hook", "/chat"}

    own = bytes.fromhex(printed.stdout.strip())
    assert listed.stdout.split() == ["hook", "json", "answers:", GATEWAY, "chat", "slack"] + [
        "answers:",
        "commands",
        "only",
    ]
    hook = next(verified(key, own, r) for r in both if r.path == "/hook" and b'"w1"' in r.body)
    assert hook["tool"] == "write_file" and hook["call_id"] == "w1"
    assert hook["rule"] == "mode:default" and hook["reason"]
    assert ARG_SECRET not in json.dumps(hook) and "[REDACTED" in hook["arguments"]["content"]
    assert hook["diff"]["path"] == "notes.md" and "+ second line" in hook["diff"]["lines"]
    assert hook["answer"]["approve"] == f"toolrun approve w1 --batch {handle.batch_id}"
    assert hook["answer"]["deny"].startswith(f"toolrun deny w1 --batch {handle.batch_id} --reason")
    path = f"{GATEWAY}/v1/batches/{handle.batch_id}/calls/w1"
    assert hook["answer"]["approve_url"] == f"{path}/approve"

    chat = next(verified(key, own, r) for r in both if r.path == "/chat" and b"w2" in r.body)
    assert set(chat) == {"text", "blocks"} and "bump" in chat["text"]
    assert f"toolrun approve w2 --batch {handle.batch_id}" in json.dumps(chat["blocks"])

    assert sorted((r.call_id, r.detail["notifier"]) for r in rows) == [
        ("w1", "chat"),
        ("w1", "hook"),
        ("w2", "chat"),
        ("w2", "hook"),
    ]
    assert {(r.status, r.attempt, r.detail["http_status"]) for r in rows} == {("delivered", 2, 200)}
