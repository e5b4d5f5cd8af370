"""Runtimes on the in-memory transport (runtime/transport/memory.py) with a real
SQLite ledger: the transcript is built from that ledger's rows."""

from __future__ import annotations

import json

import pytest

from runtime.client import Runtime
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.worker.in_memory import memory_transport

KEY = b"transcript-test-key"


@pytest.fixture
def rt(tmp_path, workspace):
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"trusted_workspaces": [str(workspace)]}))
    settings = Settings(home=tmp_path / "home", user_settings_file=user, approval_timeout=30)
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", seal_key=KEY)  # as from_settings
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    transport = memory_transport(registry=registry, ledger=ledger, settings=settings, key=KEY)
    runtime = Runtime(settings, registry=registry, ledger=ledger, transport=transport)
    yield runtime
    runtime.close()
    transport.close()
