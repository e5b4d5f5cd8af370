"""Approvals end to end through real workers, answered from a second process."""

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest
import redis

from runtime.settings import Settings
from runtime.types import ApprovalRequested, Status
from tests.conftest import embedded_stack, runtime_on
from tests.support.cli import stack_env, toolrun
from tests.support.tools import held_running, marks, release
from tests.support.waiting import wait_for

TOOLRUN = shutil.which("toolrun", path=os.path.dirname(sys.executable))


def call(call_id, name, **arguments):
    return {"id": call_id, "name": name, "arguments": arguments}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """The session's stack as conftest.py starts it, but sweeping a batch once it is
    3 s old, not 15 (`resend_after`): an approval given while Redis was away, or
    whose message was lost, is carried on by that sweep, which each of those two
    tests otherwise waited 15 s for."""
    with embedded_stack(tmp_path_factory.mktemp("approvals-home"), resend_after=3.0) as record:
        yield record


@pytest.fixture(scope="module")
def runtime(stack, user_settings):
    rt = runtime_on(stack, user_settings)
    yield rt
    rt.close()


@pytest.fixture
def answer(stack, user_settings):
    """Run `toolrun approve|deny ...` as another process, as a human's CLI would."""

    def run(*args, code=0):
        env = {
            **os.environ,
            "TOOLRUN_HOME": str(stack.home),
            "TOOLRUN_REDIS_URL": stack.redis_url,
            "TOOLRUN_DATABASE_URL": stack.database_url,
            "TOOLRUN_TOOL_MODULES": "tests.support.tools",
            "TOOLRUN_USER_SETTINGS_FILE": str(user_settings),
        }
        done = subprocess.run([TOOLRUN, *args], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == code, done.stderr
        return done.stdout if code == 0 else done.stderr

    return run


def wait_for_notice(stream, call_id):
    for event in stream:
        if event.call_id == call_id and isinstance(event, ApprovalRequested):
            return event
    raise AssertionError(f"no approval notice for {call_id}")


def test_approve_from_another_process(runtime, workspace, answer):
    batch = [
        call("r1", "nap", label="before"),
        call("w1", "bump", label="asked"),
        call("r2", "nap", label="after"),
    ]
    handle = runtime.submit(batch, mode="default", workspace=workspace)
    stream = handle.stream(timeout=60)
    notice = wait_for_notice(stream, "w1")
    assert notice.tool == "bump" and "approval" in notice.reason
    assert "w1" in answer("approvals", "--batch", handle.batch_id)
    assert marks(workspace, "effects") == []
    answer("approve", "w1", "--batch", handle.batch_id, "--by", "bob")
    results = handle.results(timeout=60)
    assert [r.status for r in results] == [Status.ok, Status.ok, Status.ok]
    assert [m["label"] for m in marks(workspace, "effects")] == ["asked"]
    spans = {m["label"]: m for m in marks(workspace, "intervals")}
    assert spans["after"]["start"] >= marks(workspace, "effects")[0]["at"]
    events = runtime.ledger.events(handle.batch_id, "w1")
    kinds = [e.kind for e in events]
    assert kinds[:3] == ["decision", "approval_asked", "approval_given"]
    given = events[2]
    assert given.approver == "bob"
    assert events[0].effect == "ask" and events[0].rule == "mode:default"


def test_deny_from_another_process(runtime, workspace, answer):
    batch = [call("w1", "bump", label="never"), call("w2", "bump", label="never2")]
    handle = runtime.submit(batch, mode="default", workspace=workspace)
    wait_for_notice(handle.stream(timeout=60), "w1")
    answer("deny", "w1", "--batch", handle.batch_id, "--reason", "not on a friday", "--by", "eve")
    results = handle.results(timeout=60)
    assert results[0].status is Status.denied
    assert "not on a friday" in results[0].model_message and "eve" in results[0].model_message
    assert results[1].status is Status.skipped
    assert marks(workspace, "effects") == []
    kinds = [e.kind for e in runtime.ledger.events(handle.batch_id, "w1")]
    assert "approval_refused" in kinds


def test_edit_and_approve_validates_the_new_arguments(runtime, workspace, answer):
    batch = [call("w1", "bump", label="original"), call("w2", "bump", label="x")]
    handle = runtime.submit(batch, mode="default", workspace=workspace, on_error="continue")
    stream = handle.stream(timeout=60)
    wait_for_notice(stream, "w1")
    answer("approve", "w1", "--batch", handle.batch_id, "--arguments", '{"label": "edited"}')
    wait_for_notice(stream, "w2")
    answer("approve", "w2", "--batch", handle.batch_id, "--arguments", '{"label": 7}')
    results = handle.results(timeout=60)
    assert results[0].status is Status.ok
    assert results[1].status is Status.invalid_arguments
    assert [m["label"] for m in marks(workspace, "effects")] == ["edited"]


def test_an_unanswered_approval_expires(stack, user_settings, workspace):
    from runtime.client import Runtime

    settings = Settings(
        home=stack.home,
        redis_url=stack.redis_url,
        database_url=stack.database_url,
        tool_modules="tests.support.tools",
        user_settings_file=user_settings,
        approval_timeout=1.0,
    )
    rt = Runtime(settings)
    try:
        started = time.monotonic()
        handle = rt.submit([call("w1", "bump", label="x")], mode="default", workspace=workspace)
        [result] = handle.results(timeout=60)
        assert result.status is Status.denied and "approval timed out" in result.model_message
        assert time.monotonic() - started < 30
        assert rt.deployment.approvals.get(handle.batch_id, "w1").status == "expired"
        assert marks(workspace, "effects") == []
    finally:
        rt.close()


def test_an_expired_approval_cannot_be_answered_from_the_cli(
    stack, user_settings, workspace, answer
):
    from runtime.client import Runtime

    settings = Settings(
        home=stack.home,
        redis_url=stack.redis_url,
        database_url=stack.database_url,
        tool_modules="tests.support.tools",
        user_settings_file=user_settings,
        approval_timeout=0.5,
    )
    rt = Runtime(settings)
    try:
        handle = rt.submit([call("late", "bump", label="x")], mode="default", workspace=workspace)
        [result] = handle.results(timeout=60)
        assert result.status is Status.denied
        said = answer("approve", "late", "--batch", handle.batch_id, code=1)
        assert "expired" in said and "Traceback" not in said
        assert marks(workspace, "effects") == []
    finally:
        rt.close()


def test_toolrun_watch_follows_a_batch_from_another_process(runtime, workspace, answer):
    handle = runtime.submit(
        [call("a", "nap", label="a"), call("b", "nap", label="b")], mode="auto", workspace=workspace
    )
    printed = answer("watch", handle.batch_id, "--json")
    shown = json.loads(printed)
    assert shown["batch_id"] == handle.batch_id
    assert [(r["call_id"], r["status"]) for r in shown["results"]] == [("a", "ok"), ("b", "ok")]


def test_an_approval_given_while_redis_is_down_is_stored_and_its_batch_goes_on(
    runtime, stack, user_settings, workspace
):
    handle = runtime.submit(
        [call("w1", "bump", label="approved offline")], mode="default", workspace=workspace
    )
    wait_for_notice(handle.stream(timeout=60), "w1")
    with socket.create_server(("127.0.0.1", 0)) as closed:  # a port nothing listens on
        port = closed.getsockname()[1]
    env = {**stack_env(stack, user_settings), "TOOLRUN_REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    done = toolrun("approve", "w1", "--batch", handle.batch_id, "--by", "bob", env=env)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    [line] = done.stdout.splitlines()
    assert f"approved w1 of batch {handle.batch_id}" in line and "Redis" in line, line
    assert runtime.deployment.approvals.get(handle.batch_id, "w1").status == "approved"
    # The cluster's Redis was never away: its sweep carries the batch on.
    assert [r.status for r in handle.results(timeout=90)] == [Status.ok]
    assert [m["label"] for m in marks(workspace, "effects")] == ["approved offline"]


def drop_messages(redis_url: str, queue: str, batch_id: str) -> int:
    """Delete a batch's messages waiting in a broker queue, as a lost message
    would be; how many there were."""
    client = redis.Redis.from_url(redis_url)
    try:
        waiting = client.lrange(queue, 0, -1)
        ours = [
            raw for raw in waiting if batch_id in base64.b64decode(json.loads(raw)["body"]).decode()
        ]
        return sum(client.lrem(queue, 0, raw) for raw in ours)
    finally:
        client.close()


def test_an_approved_call_whose_message_was_lost_is_sent_again(runtime, stack, workspace, request):
    request.addfinalizer(lambda: release(workspace, "busy"))
    busy = runtime.submit(
        [call("busy", "held_write", label="busy")],
        mode="auto",
        workspace=workspace,
        rules={"allow": ["held_write"]},
    )
    held_running(workspace, 1)  # the one effects slot is taken: the next message waits in Redis
    handle = runtime.submit(
        [call("w1", "bump", label="approved")], mode="default", workspace=workspace, timeout=90
    )
    wait_for_notice(handle.stream(timeout=60), "w1")
    assert handle.approve("w1", by="bob")
    assert drop_messages(stack.redis_url, "effects", handle.batch_id) == 1
    release(workspace, "busy")
    assert [r.status for r in busy.results(timeout=60)] == [Status.ok]
    [result] = handle.results(timeout=120)  # sent again, not skipped at the deadline
    assert result.status is Status.ok, result.model_message
    assert [m["label"] for m in marks(workspace, "effects")] == ["busy", "approved"]
    given = [e for e in runtime.ledger.events(handle.batch_id, "w1") if e.kind == "approval_given"]
    assert [e.approver for e in given] == ["bob"]


def test_only_the_first_answer_counts(runtime, workspace):
    handle = runtime.submit([call("w1", "bump", label="x")], mode="default", workspace=workspace)
    wait_for_notice(handle.stream(timeout=60), "w1")
    assert handle.approve("w1", by="first")
    assert not handle.deny("w1", "too late", by="second")
    assert handle.results(timeout=60)[0].status is Status.ok


CLOSE_WHILE_ASKING = """
import sys
from runtime.client import Runtime
from runtime.types import ApprovalRequested

rt = Runtime.from_env()
handle = rt.submit([{"id": "w1", "name": "bump", "arguments": {"label": "asked"}},
                    {"id": "w2", "name": "bump", "arguments": {"label": "later"}}],
                   mode="default", workspace=sys.argv[1])
for event in handle.stream(timeout=60):
    if isinstance(event, ApprovalRequested):
        break
rt.close()
rt.close()
for result in handle.results(timeout=30):
    print(result.call_id, result.status.value, result.model_message)
"""


def test_closing_the_runtime_ends_its_pending_batches_without_a_traceback(
    stack, user_settings, workspace
):
    env = {
        **os.environ,
        "TOOLRUN_HOME": str(stack.home),
        "TOOLRUN_REDIS_URL": stack.redis_url,
        "TOOLRUN_DATABASE_URL": stack.database_url,
        "TOOLRUN_TOOL_MODULES": "tests.support.tools",
        "TOOLRUN_USER_SETTINGS_FILE": str(user_settings),
    }
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_WHILE_ASKING, str(workspace)],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["w1", "cancelled"], ["w2", "cancelled"]]
    assert "the runtime was closed" in lines[0]
    assert marks(workspace, "bumps") == []


def test_a_notice_published_while_the_clients_channel_is_down_still_reaches_it(
    runtime, stack, workspace, request
):
    """A notice is only published (not kept in Redis): one sent while the
    client's results channel was down comes from the ledger's pending approvals
    on a later look, so the stream still shows it and the batch can go on."""
    request.addfinalizer(lambda: release(workspace, "first"))
    handle = runtime.submit(
        [call("h", "held_write", label="first"), call("w1", "bump", label="asked")],
        mode="default",
        workspace=workspace,
        rules={"allow": ["held_write"]},
        timeout=120,
    )
    held_running(workspace, 1)
    state = redis.Redis.from_url(stack.redis_url)
    stop, killed = threading.Event(), []

    def keep_channels_down() -> None:  # every subscriber, as often as it comes back
        while not stop.is_set():
            killed.append(state.client_kill_filter(_type="pubsub"))
            time.sleep(0.005)

    killer = threading.Thread(target=keep_channels_down, daemon=True)
    killer.start()
    try:
        release(workspace, "first")
        # asked, notice published
        wait_for(
            lambda: runtime.deployment.approvals.pending(handle.batch_id),
            60,
            "approval request of w1",
        )
        time.sleep(1.0)
    finally:
        stop.set()
        killer.join()
        state.close()
    assert sum(killed) > 0
    wait_for_notice(handle.stream(timeout=60), "w1")
    assert handle.approve("w1", by="bob")
    assert [r.status for r in handle.results(timeout=90)] == [Status.ok, Status.ok]
