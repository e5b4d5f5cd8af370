"""Scripts that fork, run in a process of their own: a child that hangs is
killed by its alarm and never holds pytest past its timeout, and it copies
none of the test process's other threads' locks (a bare `os.fork` in the
test process once hung the whole suite)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
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


# In the scripts themselves (`tests/ledger/*_fork.py`):


def fork_child(run: Callable[[], int]) -> int:
    """A child that exits with `run()`'s code (3 if it raised); its pid, in the parent."""
    pid = os.fork()
    if pid == 0:
        try:
            code = run()
        except BaseException:  # noqa: BLE001 - the child reports through its exit code
            code = 3
        os._exit(code)
    return pid


def waited(pid: int, number: int) -> int:
    """Child `number`'s exit code once it ended, said on stderr if not 0; a
    child killed by a signal as a shell tells it (128 + the signal)."""
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"child {number} (pid {pid}): exit {code}", file=sys.stderr)
    return code if code >= 0 else 128 - code
