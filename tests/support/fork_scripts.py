"""Scripts that fork, run in a process of their own: a child that hangs is
killed by its alarm and never holds pytest past its timeout, and it copies
none of the test process's other threads' locks (a bare `os.fork` in the
test process once hung the whole suite)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def run_fork_script(script: Path, database: Path, forks: int) -> subprocess.CompletedProcess:
    """`script` run on `database`, making `forks` forks; its exit code says
    which child failed and how."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(script), str(database), str(forks)],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=90,
    )
