"""A stand-in pool process that records a session running `sleep 60` in a
sessions registry, says the session's pid, and is SIGKILLed: what a worker
killed whole leaves behind (runtime/sessions.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import os, pathlib, signal, subprocess, sys, time
from runtime import sessions
sessions.configure(pathlib.Path(sys.argv[1]))
child = subprocess.Popen(sessions.wrapped(["sleep", "60"]), start_new_session=True)
entry = sessions._directory() / str(child.pid)
while not entry.exists():
    time.sleep(0.01)
print(child.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def dead_pool(root: Path) -> tuple[int, int]:
    """Such a process under the registry `root`, dead: (its pid, its session's)."""
    pool = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(root)], stdout=subprocess.PIPE, text=True
    )
    session = int(pool.stdout.readline())
    pool.wait(10)
    return pool.pid, session
