"""The `Worker`'s view of a chain from the worker's main process: the time
limit of a chain's task is the sum of its steps' (a backstop: each step has
its own, `workers/request.py`), and each step's is its tool's."""

from __future__ import annotations

import pytest

from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.transport import chain
from runtime.types import CallMessage
from runtime.worker.memory import MemoryTransport
from tests.support.messages import KEY, message


@pytest.fixture
def worker(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    settings = Settings(home=tmp_path, default_timeout=10, kill_grace=2)
    transport = MemoryTransport(
        registry=registry, ledger=ledger, settings=settings, key=KEY, sweep=False
    )
    yield transport.worker
    transport.close()
    ledger.close()


def test_a_chains_task_may_run_its_steps_limits_and_each_step_has_its_own(worker, tmp_path):
    steps = [
        CallMessage.from_wire(message(call_id, tool, {"label": call_id}, workspace=tmp_path))
        for call_id, tool in (("a", "bump"), ("h", "held_write"), ("b", "bump"))
    ]
    raw = chain.link(steps).wire()
    assert worker.hard_limit(raw) == (10 + 2) + (60 + 2) + (10 + 2)  # held_write: timeout=60
    assert worker.hard_limit(raw, alone=True) == 12
    assert worker.hard_limit(chain.step_of(raw, 1), alone=True) == 62
    assert worker.hard_limit(steps[0].wire()) == 12
    assert worker.hard_limit({"tool": 3}) == 12  # malformed: the default timeout's limit
