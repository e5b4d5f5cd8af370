"""The chain watchdog (`workers/request.py`) is on the worker's event loop only
while a chain is reserved: an idle worker's main process is not woken for it."""

from __future__ import annotations

import pytest
from celery.worker import state
from kombu.asynchronous import Hub

from workers.request import CallRequest, Watchdog


class Pool:  # the watchdog asks the pool to kill a process only for an overdue step
    _pool = None


@pytest.fixture
def hub():
    loop = Hub()
    yield loop
    loop.close()


def pending(hub: Hub) -> int:
    return sum(1 for entry in hub.timer.queue if not entry.entry.canceled)


def reserved_chain() -> CallRequest:
    request = CallRequest.__new__(CallRequest)  # what the consumer builds from a chain's message
    request.steps, request._apply_result, request.worker_pid = 3, None, None
    state.reserved_requests.add(request)
    return request


def test_the_watchdog_looks_only_while_a_chain_is_reserved(hub):
    watchdog = Watchdog(hub, Pool(), 0.1)
    assert pending(hub) == 0  # idle: nothing on the loop's timer
    watchdog.arm()
    watchdog.arm()  # armed twice, one look
    assert pending(hub) == 1
    watchdog.tick()  # no chain reserved: it does not look again
    assert pending(hub) == 1 and not watchdog.armed

    request = reserved_chain()
    try:
        watchdog.tick()
        assert watchdog.armed  # a chain is reserved: it looks again
    finally:
        state.reserved_requests.discard(request)
    watchdog.armed = False
    watchdog.tick()
    assert not watchdog.armed
