"""One client process follows many open batches on real workers and Redis with
a fixed number of threads and Redis connections (runtime/client/follower.py,
docs/architecture.md, "Following batches"), and every batch still ends."""

from __future__ import annotations

import gc
import os
import threading
import weakref

import redis

from runtime.transport.redis_client import REDIS_CONNECTIONS
from runtime.types import ApprovalRequested, Status
from tests.conftest import runtime_on
from tests.support.waiting import wait_for

BATCHES = 300  # enough that a thread or a connection per batch could not hide
THREADS = 8  # what the client may add, in all, to the threads it had before its first batch


def named_connections(stack, name: str) -> int:
    """Connections Redis holds for clients that named themselves `name`."""
    with redis.Redis.from_url(stack.redis_url) as admin:
        return sum(client.get("name") == name for client in admin.client_list())


def test_a_client_follows_300_batches_waiting_for_approval_on_a_few_threads(
    stack, user_settings, workspace
):
    name = f"toolrun-client:{os.getpid()}"  # every Runtime of this process names its connections
    connections = named_connections(stack, name)
    threads = threading.active_count()
    with runtime_on(stack, user_settings) as rt:
        calls = [{"id": "w", "name": "bump", "arguments": {"label": "asked"}}]
        handles = [
            rt.submit(calls, mode="default", workspace=workspace, timeout=600)
            for _ in range(BATCHES)
        ]
        for handle in handles:
            assert isinstance(next(iter(handle.stream(timeout=120))), ApprovalRequested)
        assert threading.active_count() <= threads + THREADS
        assert named_connections(stack, name) <= connections + REDIS_CONNECTIONS
        for index, handle in enumerate(handles):
            if index % 30 == 0:
                assert handle.approve("w", by="test")
            else:
                assert handle.deny("w", "not now", by="test")
        ends = [handle.results(timeout=120)[0].status for handle in handles]
        assert threading.active_count() <= threads + THREADS
    assert ends.count(Status.ok) == BATCHES // 30
    assert ends.count(Status.denied) == BATCHES - BATCHES // 30


def test_an_ended_batch_is_freed_without_the_garbage_collector(stack, user_settings, workspace):
    """Nothing the follower keeps (a timer still due, the inbox's wake-up)
    holds a batch once it has ended: a client submitting batch after batch
    would otherwise keep a second's worth of them alive, and its collector
    would walk them (a 10 ms pause every hundred 1-call batches here)."""
    with runtime_on(stack, user_settings) as rt:
        calls = [{"id": "r", "name": "read_file", "arguments": {"path": "a.txt"}}]
        (workspace / "a.txt").write_text("a")
        gc.disable()
        try:
            handle = rt.submit(calls, mode="auto", workspace=workspace)
            assert handle.results(timeout=60)[0].status is Status.ok
            run = weakref.ref(handle._run)
            del handle
            wait_for(lambda: run() is None, 10, "release of the batch's run", every=0.01)
        finally:
            gc.enable()
