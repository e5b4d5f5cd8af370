"""A `Runtime` on the in-memory transport (runtime/transport/memory.py): the same
client, batch and executor code as on Celery, the workers on threads of this
process, the ledger a real SQLite file, and the test tools registered."""

from __future__ import annotations

import json

import pytest

from runtime.client import Runtime
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.worker.in_memory import memory_transport


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    ledger = Ledger(f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'ledger.db'}")
    yield ledger
    ledger.close()


@pytest.fixture
def rt(tmp_path, ledger, workspace):
    """A runtime whose user settings trust `workspace`."""
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"trusted_workspaces": [str(workspace)]}))
    settings = Settings(home=tmp_path / "home", user_settings_file=user, approval_timeout=30)
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    transport = memory_transport(registry=registry, ledger=ledger, settings=settings)
    runtime = Runtime(settings, registry=registry, ledger=ledger, transport=transport)
    yield runtime
    transport.close()
