"""The real `@modelcontextprotocol/server-filesystem` from npm, for the MCP
tests: installed once per machine into `~/.cache/toolrun/test-npm/<version>/`
(`$XDG_CACHE_HOME` if set) and reused by every clone and worktree, CI's fresh
clones included; installing it costs about a minute. Without npm, or when the
install fails (no network), the tests that need it are skipped and say why."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

PACKAGE = "@modelcontextprotocol/server-filesystem"
VERSION = "2026.8.31"  # the version issue 15 was measured against
CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "toolrun"
    / "test-npm"
    / VERSION
)
BINARY = Path("node_modules") / ".bin" / "mcp-server-filesystem"


def filesystem_server() -> Path:
    """The server's executable, installing it first if needed; skips the test
    when it cannot be had."""
    if _installed(CACHE):
        return CACHE / BINARY
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(f"npm and node are not on PATH, so {PACKAGE} cannot be installed")
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE.parent / f".{VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be installing it now
        if not _installed(CACHE):
            _install(npm)
    return CACHE / BINARY


def _install(npm: str) -> None:
    """Into a folder of its own, renamed into place whole: a run killed
    mid-install leaves no half-installed cache behind."""
    staging = Path(tempfile.mkdtemp(prefix=f".{VERSION}-", dir=CACHE.parent))
    try:
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(staging),
                "--prefer-offline",
                "--no-audit",
                "--no-fund",
                f"{PACKAGE}@{VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 or not _installed(staging):
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"npm could not install {PACKAGE}@{VERSION}: {last}")
        shutil.rmtree(CACHE, ignore_errors=True)
        staging.rename(CACHE)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _installed(prefix: Path) -> bool:
    manifest = prefix / "node_modules" / PACKAGE / "package.json"
    try:
        version = json.loads(manifest.read_text()).get("version")
    except (OSError, ValueError):
        return False
    return version == VERSION and (prefix / BINARY).exists()
