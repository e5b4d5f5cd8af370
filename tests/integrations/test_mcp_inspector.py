"""`toolrun mcp serve` driven by an MCP client no one here wrote: the MCP
Inspector's command-line mode, from npm, over stdio and Streamable HTTP. The
install is cached under the temp directory; without node and npm, or when the
package cannot be installed, the tests skip and say why."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from runtime.gateway.keys import Role, mint
from runtime.ledger.keys import Keys
from tests.support.cli import REPO, SCRIPT, stack_env
from tests.support.tools import marks

PACKAGE = "@modelcontextprotocol/inspector@2.12.0"
CACHE = Path(tempfile.gettempdir()) / "toolrun-tests-npm" / "inspector-2.12.0"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    """The Inspector's CLI, installed once per machine."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("the MCP Inspector needs node and npm, and they are not on PATH")
    binary = CACHE / "node_modules" / ".bin" / "inspector"
    if not binary.exists():
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="installing-", dir=CACHE.parent))
        argv = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(staging), PACKAGE]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            shutil.rmtree(staging, ignore_errors=True)
            pytest.skip(f"npm did not install {PACKAGE} within 240 s")
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            said = (done.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"npm could not install {PACKAGE}: {said}")
        try:
            staging.rename(CACHE)
        except OSError:  # another test process installed it first
            shutil.rmtree(staging, ignore_errors=True)
    return [str(binary), "--cli"]


def inspect(
    argv: list[str], *request: str, env: dict[str, str] | None = None, exit: int = 0
) -> dict:
    """One Inspector request; its JSON answer. (It exits 5 for an `isError`.)"""
    done = subprocess.run(
        [*argv, *request],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == exit, done.stderr
    return json.loads(done.stdout)


def over_stdio(inspector, stack, user_settings, workspace, *request: str, exit: int = 0) -> dict:
    """The Inspector starts the server with a small environment of its own:
    the stack's settings (and the tests' state home) are given with `-e`."""
    server = [SCRIPT or "toolrun", "mcp", "serve", "--workspace", str(workspace)]
    env = stack_env(stack, user_settings)
    given = [
        f"{name}={value}"
        for name, value in env.items()
        if name.startswith(("TOOLRUN_", "XDG_", "PYTHON"))
    ]
    settings = [part for setting in given for part in ("-e", setting)]
    argv = [*inspector, *settings, "--cwd", str(REPO)]
    return inspect(argv, *request, "--", *server, env=env, exit=exit)


def test_over_stdio_the_inspector_lists_and_calls_the_tools(
    inspector, stack, user_settings, workspace, runtime
):
    listed = over_stdio(inspector, stack, user_settings, workspace, "--method", "tools/list")
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert tools["echo"]["annotations"]["readOnlyHint"] is True
    assert tools["bump"]["inputSchema"]["properties"]["label"]["type"] == "string"
    called = over_stdio(
        inspector,
        stack,
        user_settings,
        workspace,
        *("--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=from npm"),
    )
    assert called["isError"] is False
    assert called["content"] == [{"type": "text", "text": "from npm"}]
    assert called["structuredContent"] == {"text": "from npm"}
    [ended] = runtime.attach(called["_meta"]["toolrun/batch_id"]).results(timeout=30)
    assert ended.worker is not None


def test_over_stdio_a_call_that_asks_says_how_to_approve(
    inspector, stack, user_settings, workspace, runtime
):
    """The Inspector's CLI declares no elicitation: the result says how."""
    called = over_stdio(
        inspector,
        stack,
        user_settings,
        workspace,
        *("--method", "tools/call", "--tool-name", "bump", "--tool-arg", "label=npm"),
        exit=5,
    )
    assert called["isError"] is True
    assert called["_meta"]["toolrun/status"] == "awaiting_approval"
    assert "toolrun approve" in called["content"][0]["text"]
    assert marks(workspace, "effects") == []


def test_over_http_the_inspector_calls_as_its_key(inspector, served, runtime, workspace):
    name = f"npm-{workspace.parent.name}"
    token = mint(Keys(runtime.ledger), name, Role.submitter, roots=[str(workspace)])
    header = ("--header", f"Authorization: Bearer {token}")
    listed = inspect(inspector, served, *header, "--method", "tools/list")
    assert "echo" in {tool["name"] for tool in listed["tools"]}
    called = inspect(
        inspector,
        served,
        *header,
        *("--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=over http"),
    )
    assert called["content"] == [{"type": "text", "text": "over http"}]
    row = runtime.ledger.batch(called["_meta"]["toolrun/batch_id"])
    assert row.submitter == f"key:{name}"
