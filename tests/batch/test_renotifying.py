"""The sweep sends a lost approval notification again, once, on real
processes (docs/architecture.md, "Approval notifications"): a delivery whose
every attempt failed, and one whose sender was killed before it recorded
anything, are each sent again by a worker's sweep and recorded; a second
delivery that fails too is not tried a third time."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from runtime.batch.renotifying import CLAIMED
from runtime.ledger.store import Ledger
from runtime.stack.processes import free_port
from tests.conftest import embedded_stack, runtime_on
from tests.support.cli import REPO, stack_env
from tests.support.waiting import wait_for
from tests.support.webhooks import Receiver

pytestmark = [pytest.mark.timeout(300), pytest.mark.server]  # a stack, a receiver
WRITE = {"id": "w", "name": "write_file", "arguments": {"path": "n.txt", "content": "x"}}
SUBMIT_AND_HANG = """
import json, sys, time
from runtime.client import Runtime
handle = Runtime.from_env().submit([json.loads(sys.argv[1])], mode="default", workspace=sys.argv[2])
print(handle.batch_id, flush=True)
time.sleep(3600)
"""


def _policy(folder, notifiers):
    path = folder / "policy.json"
    path.write_text(json.dumps({"notifications": notifiers}))
    return path


def _told(ledger, batch_id, notifier, count):
    """The notifier's `approval_notified` rows of the batch's call, once there are `count`."""

    def rows():
        found = [
            (e.status, bool(e.detail.get("again")))
            for e in ledger.events(batch_id, "w")
            if e.kind == "approval_notified" and e.detail["notifier"] == notifier
        ]
        return found if len(found) >= count else None

    return wait_for(rows, 120, f"{count} rows of {notifier}", every=0.2)


@pytest.fixture(scope="module")
def refusing(tmp_path_factory):
    """A receiver that refuses every attempt of a delivery (5) and takes the sixth."""
    with Receiver(failures=5) as running:
        yield running


@pytest.fixture(scope="module")
def failing_stack(tmp_path_factory, refusing):
    home = tmp_path_factory.mktemp("renotify")
    nobody = f"http://127.0.0.1:{free_port()}/gone"  # connection refused, every time
    policy = _policy(
        home, [{"name": "hook", "url": f"{refusing.url}/hook"}, {"name": "gone", "url": nobody}]
    )
    with embedded_stack(home / "stack", policy_file=policy) as record:
        yield record, policy


def test_a_delivery_that_failed_is_sent_again_once_by_the_sweep(
    failing_stack, refusing, user_settings, tmp_path
):
    stack, policy = failing_stack
    runtime = runtime_on(stack, user_settings, policy_file=policy)
    try:
        first = runtime.submit([WRITE], mode="default", workspace=tmp_path).batch_id
        hook = _told(runtime.ledger, first, "hook", 3)
        gone = _told(runtime.ledger, first, "gone", 3)
        # A later batch's second delivery proves the sweep ran after the first's.
        (tmp_path / "later").mkdir()
        later = runtime.submit([WRITE], mode="default", workspace=tmp_path / "later").batch_id
        _told(runtime.ledger, later, "gone", 3)
        _told(runtime.ledger, later, "hook", 3)
        assert _told(runtime.ledger, first, "gone", 3) == gone  # no third delivery
        for batch_id in (first, later):
            assert runtime.deny(batch_id, "w", "done", by="test")
    finally:
        runtime.close()
    assert hook == [("failed", False), (CLAIMED, True), ("delivered", True)]
    assert gone == [("failed", False), (CLAIMED, True), ("failed", True)]
    requests = [r for r in refusing.requests if first in r.headers["x-toolrun-delivery"]]
    assert [r.answered for r in requests] == [500] * 5 + [200]  # 5 attempts, then once more
    assert len({r.headers["x-toolrun-delivery"] for r in requests}) == 1  # one id: dedupable
    assert json.loads(requests[-1].body)["call_id"] == "w"


@pytest.fixture(scope="module")
def stalling(tmp_path_factory):
    """A receiver that holds the first request of each delivery unanswered."""
    with Receiver(failures=1, stall=True) as running:
        yield running


@pytest.fixture(scope="module")
def stalled_stack(tmp_path_factory, stalling):
    home = tmp_path_factory.mktemp("renotify-died")
    policy = _policy(home, [{"name": "hook", "url": f"{stalling.url}/hook"}])
    with embedded_stack(
        home / "stack", policy_file=policy, notification_resend_after=8.0
    ) as record:
        yield record, policy


def test_a_notification_whose_sender_died_is_sent_again_by_the_sweep(
    stalled_stack, stalling, user_settings, tmp_path
):
    stack, policy = stalled_stack
    env = {**stack_env(stack, user_settings), "TOOLRUN_POLICY_FILE": str(policy)}
    submitter = subprocess.Popen(
        [sys.executable, "-c", SUBMIT_AND_HANG, json.dumps(WRITE), str(tmp_path)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        batch_id = submitter.stdout.readline().strip()
        assert batch_id, "the submitter printed no batch id"
        stalling.seen(1)  # its delivery is under way, and held
        submitter.send_signal(signal.SIGKILL)
        submitter.wait(timeout=60)
    finally:
        if submitter.poll() is None:
            submitter.kill()
            submitter.wait()
    ledger = Ledger(stack.database_url)
    try:
        rows = _told(ledger, batch_id, "hook", 2)
        taken = stalling.wait_for(1)
    finally:
        ledger.close()
    assert rows == [(CLAIMED, True), ("delivered", True)]
    assert [r.headers["x-toolrun-delivery"] for r in taken] == [f"{batch_id}/w/hook"]
    assert len(stalling.requests) == 2  # the one its dead sender made, and the sweep's
