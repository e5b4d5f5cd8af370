"""Policy hooks through the real stack (docs/architecture.md, "Policy hooks"):
for each kind (a Python callable, an HTTP endpoint, a command), a pre hook
that allows what the gate would ask, denies, asks, replaces the arguments
(validly or not), and times out under fail-closed and fail-open; a post hook,
run on a worker, that adds a note for the model. Every answer is a ledger row
with its latency, and the transcript shows it."""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from pathlib import Path

import pytest

from runtime import config
from runtime.keyring import Purpose, derived
from runtime.transcript import render
from runtime.types import ApprovalRequested, Status
from tests.conftest import runtime_on
from tests.support.hook_answers import DENIAL
from tests.support.hook_server import HookServer
from tests.support.waiting import wait_for

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "hook_answers.py"
KINDS = ("python", "http", "command")


@pytest.fixture(scope="module")
def server():
    with HookServer() as running:
        yield running


def target(kind: str, server: HookServer) -> dict:
    if kind == "python":
        return {"callable": "tests.support.hook_answers:decide"}
    if kind == "http":
        return {"url": server.url}
    return {"command": [sys.executable, str(SCRIPT)]}


def client(stack, user_settings, folder: Path, kind: str, server: HookServer, on_failure: str):
    hooks = [
        {
            "name": f"{kind}-gate",
            "when": "pre",
            "kind": kind,
            "timeout": 2,
            "on_failure": on_failure,
            **target(kind, server),
        },
        {"name": f"{kind}-review", "when": "post", "kind": kind, "tools": ["echo"]}
        | target(kind, server),
    ]
    policy = folder / f"{kind}-{on_failure}.json"
    policy.write_text(json.dumps({"hooks": hooks}))
    return runtime_on(stack, user_settings, policy_file=policy)


@pytest.fixture(scope="module", params=KINDS)
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def closed(stack, user_settings, tmp_path_factory, kind, server):
    runtime = client(stack, user_settings, tmp_path_factory.mktemp("org"), kind, server, "closed")
    yield runtime
    runtime.close()


@pytest.fixture(scope="module")
def opened(stack, user_settings, tmp_path_factory, kind, server):
    runtime = client(stack, user_settings, tmp_path_factory.mktemp("org"), kind, server, "open")
    yield runtime
    runtime.close()


def one(runtime, workspace, name, value, mode="default"):
    field = "label" if name == "bump" else "text"
    call = {"id": "c1", "name": name, "arguments": {field: value}}
    handle = runtime.submit([call], mode=mode, workspace=workspace)
    return handle, handle.results(timeout=60)[0]


def hook_rows(runtime, batch_id, count=1, when="pre"):
    def rows():
        events = runtime.ledger.events(batch_id)
        found = [e for e in events if e.kind == "hook" and e.detail["when"] in when]
        return found if len(found) >= count else None

    return wait_for(rows, 60, f"{count} hook rows")


def test_an_org_hook_allows_what_the_gate_would_ask(closed, kind, workspace):
    handle, result = one(closed, workspace, "bump", "allow")  # a write: default mode asks
    assert result.status is Status.ok, result
    (row,) = hook_rows(closed, handle.batch_id)
    assert row.rule == f"hook:{kind}-gate" and row.reason == "the hook knows this one"
    assert row.detail["decision"] == "allow" and row.detail["latency_ms"] >= 0
    decision = closed.transcript(handle.batch_id)["calls"][0]["decision"]
    assert decision["effect"] == "allow" and decision["rule"] == f"hook:{kind}-gate"


def test_a_hook_denies_naming_itself_and_its_reason(closed, kind, workspace):
    handle, result = one(closed, workspace, "echo", "deny")  # a read: the gate allows it
    assert result.status is Status.denied, result
    assert f"{kind}-gate" in result.model_message and DENIAL in result.model_message
    document = closed.transcript(handle.batch_id)
    transcript = document["calls"][0]
    assert transcript["decision"]["rule"] == f"hook:{kind}-gate"
    assert [h["hook"] for h in transcript["hooks"]] == [f"{kind}-gate"]
    text = render(document, "md")
    assert f"**Hook** `{kind}-gate` (pre, {kind}) in " in text
    assert f"ms: deny; reason: {DENIAL}" in text


def test_a_hook_asks_and_a_person_answers(closed, kind, workspace):
    call = {"id": "c1", "name": "echo", "arguments": {"text": "ask"}}
    handle = closed.submit([call], mode="default", workspace=workspace)
    notice = next(e for e in handle.stream(timeout=60) if isinstance(e, ApprovalRequested))
    assert "a person should look" in notice.reason and f"{kind}-gate" in notice.reason
    assert closed.approve(handle.batch_id, "c1", by="tester")
    assert handle.results(timeout=60)[0].status is Status.ok


def test_a_hook_asking_in_auto_mode_denies(closed, workspace):
    _, result = one(closed, workspace, "echo", "ask", mode="auto")
    assert result.status is Status.denied and "nobody to ask" in result.model_message


def test_a_hook_replaces_the_arguments(closed, workspace):
    handle, result = one(closed, workspace, "echo", "replace")
    assert result.status is Status.ok and result.content == {"text": "replaced"}, result
    assert closed.transcript(handle.batch_id)["calls"][0]["arguments"] == {"text": "replaced"}


def test_invalid_replaced_arguments_are_a_result_naming_the_hook(closed, kind, workspace):
    _, result = one(closed, workspace, "echo", "invalid")
    assert result.status is Status.invalid_arguments, result
    assert f"{kind}-gate" in result.model_message and "text" in result.model_message


def test_a_hook_that_times_out_fails_closed(closed, kind, workspace):
    handle, result = one(closed, workspace, "echo", "slow")
    assert result.status is Status.denied, result
    assert "fails closed" in result.model_message and f"{kind}-gate" in result.model_message
    (row,) = hook_rows(closed, handle.batch_id)
    assert "within 2 s" in row.detail["failure"] and row.detail["on_failure"] == "closed"


def test_a_hook_that_times_out_fails_open(opened, workspace):
    handle, result = one(opened, workspace, "echo", "slow")
    assert result.status is Status.ok, result
    (row,) = hook_rows(opened, handle.batch_id)
    assert row.detail["on_failure"] == "open" and "failure" in row.detail


def test_a_post_hook_adds_a_note_for_the_model(closed, kind, workspace):
    handle, result = one(closed, workspace, "echo", "note")
    assert result.status is Status.ok, result
    assert f"[note from hook '{kind}-review': checked by the hook]" in result.model_message
    assert "marked 'reviewed'" in result.summary
    rows = hook_rows(closed, handle.batch_id, 2, "prepost")  # the pre hook's, the worker's
    post = next(r for r in rows if r.detail["when"] == "post")
    assert post.worker and post.detail["mark"] == "reviewed"


def test_a_command_exiting_1_blocks_nothing(closed, kind, workspace):
    if kind != "command":
        pytest.skip("exit codes are a command's")
    handle, result = one(closed, workspace, "echo", "crash")
    assert result.status is Status.ok, result
    (row,) = hook_rows(closed, handle.batch_id)
    assert row.detail["on_failure"] == "ignored" and "exited with 1" in row.detail["failure"]


def test_the_http_request_is_signed_under_the_hooks_key(closed, kind, server, workspace):
    if kind != "http":
        pytest.skip("signatures are an HTTP hook's")
    one(closed, workspace, "echo", "plain")
    asked = next(a for a in reversed(server.requests) if b"pre_tool_use" in a.body)
    own = derived(config.signing_key(closed.settings), Purpose.hook)
    stamp = asked.headers["x-toolrun-timestamp"].encode()
    expected = hmac.new(own, stamp + b"." + asked.body, hashlib.sha256).hexdigest()
    assert asked.headers["x-toolrun-signature"] == f"sha256={expected}"
    request = json.loads(asked.body)
    assert request["submitter"] and request["decision"]["effect"] == "allow"
    assert request["risk"] == "read" and request["mode"] == "default"
