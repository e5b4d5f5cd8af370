"""What the MCP faces' tests share: `toolrun mcp serve --http` as a process of
its own on the session's stack."""

from __future__ import annotations

import socket
import subprocess

import pytest

from runtime.stack.processes import free_port
from tests.support.cli import REPO, SCRIPT, stack_env
from tests.support.waiting import wait_for


@pytest.fixture
def served(stack, user_settings, workspace, tmp_path):
    """The server on a free port, listening; stopped after."""
    port = free_port()
    argv = [SCRIPT or "toolrun", "mcp", "serve", "--workspace", str(workspace)]
    with open(tmp_path / "server.log", "ab") as log:
        process = subprocess.Popen(
            [*argv, "--http", str(port)],
            env=stack_env(stack, user_settings),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def listening() -> bool:
        assert process.poll() is None, (tmp_path / "server.log").read_text()
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(listening, timeout=60, what="MCP server listening")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=15)
