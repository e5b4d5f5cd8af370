"""The docs site, built once per test session as `make docs` builds it
(`mkdocs build --strict`), from a copy of the checkout's mkdocs.yml, docs/ and
docsgen/ with one how-to page added that mkdocs.yml does not name."""

from __future__ import annotations

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
    root = tmp_path_factory.mktemp("docs-build")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copytree(
        REPO / "docsgen", root / "docsgen", ignore=shutil.ignore_patterns("__pycache__")
    )
    (root / "docs" / UNNAMED_PAGE).write_text(f"# {UNNAMED_TITLE}\n\nWritten by a helper.\n")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / "site")],
        cwd=root,
        env={**_environ(), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{output[-5000:]}"
    return Built(root / "site", output)


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
