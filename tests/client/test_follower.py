"""The follower (runtime/client/follower.py) on the in-memory transport: many
open batches on its few threads, and a batch's deadline kept by a timer when
no worker's sweep ends it. tests/integration/test_following.py counts threads
and Redis connections on real processes."""

from __future__ import annotations

import json
import threading

import pytest

from runtime.client import Runtime
from runtime.client.follower import DRIVERS
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import ApprovalRequested, Status
from runtime.worker.in_memory import memory_transport
from tests.support.tools import held_running, release
from tests.support.waiting import wait_for


@pytest.fixture
def unswept(tmp_path, ledger, workspace):
    """A runtime whose in-memory "workers" run no sweep: only its follower can
    end a batch at its deadline, as with no worker alive."""
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"trusted_workspaces": [str(workspace)]}))
    settings = Settings(home=tmp_path / "home", user_settings_file=user)
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    transport = memory_transport(registry=registry, ledger=ledger, settings=settings, sweep=False)
    runtime = Runtime(settings, registry=registry, ledger=ledger, transport=transport)
    yield runtime
    release(workspace, "r")
    transport.close()
    for thread in threading.enumerate():  # the read still running ends before the ledger closes
        if thread.name.startswith("memory-reads"):
            thread.join(timeout=30)


def client_threads() -> int:
    """Threads of this process but the in-process cluster's own workers and
    the ledger's checkpointing thread (one per ledger, started on its 16th
    commit, whichever batch that is)."""
    return sum(
        not t.name.startswith(("memory-", "toolrun-checkpoint")) for t in threading.enumerate()
    )


def test_a_hundred_batches_waiting_for_approval_add_no_thread(rt, workspace):
    asks = [{"id": "w", "name": "bump", "arguments": {"label": "w"}}]
    first = rt.submit(asks, mode="default", workspace=workspace)  # the drivers start here
    threads = client_threads()
    handles = [first] + [rt.submit(asks, mode="default", workspace=workspace) for _ in range(99)]
    for handle in handles:
        assert isinstance(next(iter(handle.stream(timeout=30))), ApprovalRequested)
    assert client_threads() <= threads  # other tests' threads may end meanwhile, never start
    assert len(rt._follower.open_runs()) == 100
    for handle in handles:
        assert handle.deny("w", "no", by="test")
    assert {handle.results(30)[0].status for handle in handles} == {Status.denied}
    assert rt._follower.open_runs() == []
    assert sum(t.is_alive() for t in rt._follower._threads) == DRIVERS  # this runtime's own


def test_with_no_sweep_the_follower_ends_a_batch_at_its_deadline(unswept, workspace):
    batch = [
        {"id": "r", "name": "held", "arguments": {"label": "r"}},  # runs past the deadline
        {"id": "w", "name": "bump", "arguments": {"label": "w"}},
    ]
    handle = unswept.submit(
        batch, mode="auto", workspace=workspace, timeout=0.2, rules={"allow": ["bump"]}
    )
    assert [r.status for r in handle.results()] == [Status.timeout, Status.skipped]


def test_an_end_reaches_an_idle_batch_on_the_arrivals_own_thread(rt, workspace):
    """No hop to a driver thread: a batch no driver is looking at reads its
    inbox where the end arrives (here, the in-memory worker's thread)."""
    held = [{"id": "h", "name": "held", "arguments": {"label": "idle"}}]
    handle = rt.submit(held, mode="auto", workspace=workspace)
    seen = []
    assert handle.subscribe(lambda event: seen.append(threading.current_thread().name)) == []
    held_running(workspace, 1)  # subscribed before it can end, however busy the machine
    release(workspace, "idle")
    assert handle.results(30)[0].status is Status.ok
    wait_for(lambda: seen, what="the end's event")
    assert not seen[0].startswith("toolrun-follower")
