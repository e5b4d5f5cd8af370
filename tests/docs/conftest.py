"""The docs site, built once per test session as `make docs` builds it
(`mkdocs build --strict`), from a copy of the checkout's mkdocs.yml, docs/ and
docsgen/ with one how-to page added that mkdocs.yml does not name."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNNAMED_PAGE = "how-to/a-page-nobody-named.md"
UNNAMED_TITLE = "A page nobody named yet"


@dataclass(frozen=True)
class Built:
    site: Path
    output: str  # what mkdocs printed


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Built:
    """One build for the whole run: under xdist (`make check`) the workers share
    it, the first to take the lock building it (xdist's recipe for a session
    fixture that runs once)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the directory every worker's base lies in
    root = shared / "docs-build"
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "output.txt").exists():
            _build(root)
    output = (root / "output.txt").read_text()
    assert (root / "site" / "index.html").exists(), f"mkdocs build --strict failed:\n{output}"
    return Built(root / "site", output)


def _build(root: Path) -> None:
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "docs", root / "docs")
    caches = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "docsgen", root / "docsgen", ignore=caches)
    (root / "docs" / UNNAMED_PAGE).write_text(f"# {UNNAMED_TITLE}\n\nWritten by a helper.\n")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / "site")],
        cwd=root,
        env={**_environ(), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    (root / "output.txt").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        shutil.rmtree(root / "site", ignore_errors=True)  # a strict failure leaves no site


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
