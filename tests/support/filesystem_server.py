"""The real `@modelcontextprotocol/server-filesystem` from npm, for the MCP
tests: installed once into `.toolrun/test-npm/` of the repository (git ignores
it) and reused. Without npm, or when the install fails (no network), the tests
that need it are skipped and say why."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = "@modelcontextprotocol/server-filesystem"
VERSION = "2026.8.31"  # the version issue 15 was measured against
CACHE = Path(__file__).resolve().parents[2] / ".toolrun" / "test-npm"


def filesystem_server() -> Path:
    """The server's executable, installing it first if needed; skips the test
    when it cannot be had."""
    binary = CACHE / "node_modules" / ".bin" / "mcp-server-filesystem"
    if binary.exists() and _installed_version() == VERSION:
        return binary
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(f"npm and node are not on PATH, so {PACKAGE} cannot be installed")
    CACHE.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", f"{PACKAGE}@{VERSION}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0 or not binary.exists():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"npm could not install {PACKAGE}@{VERSION}: {last}")
    return binary


def _installed_version() -> str | None:
    import json

    manifest = CACHE / "node_modules" / PACKAGE / "package.json"
    try:
        return json.loads(manifest.read_text()).get("version")
    except (OSError, ValueError):
        return None
