"""What a worker's main process builds before it forks its pool
(`workers/tasks.py`, docs/architecture.md, "Round trips and memory"): a pool
process forked from it imports nothing more to redact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import json, os, sys
from workers import tasks
from runtime.redaction import BUILT_IN, redactor_for

tasks._build_before_forking()
settings = tasks.parts().settings
read, write = os.pipe()
pid = os.fork()
if pid == 0:  # a pool process: its first redactions, as its first call's
    before = set(sys.modules)
    BUILT_IN.redact_text("token ghp_" + "a" * 36)
    redactor_for(settings.redaction_patterns).redact({"password": "hunter2"})
    os.write(write, json.dumps(sorted(set(sys.modules) - before)).encode())
    os._exit(0)
os.close(write)
found = b""
while chunk := os.read(read, 65536):
    found += chunk
os.waitpid(pid, 0)
print(found.decode())
"""


def test_a_pool_process_redacts_with_detectors_built_before_the_fork(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLRUN_")}
    env |= {
        "TOOLRUN_HOME": str(tmp_path),
        "TOOLRUN_REDACTION_PATTERNS": json.dumps({"ticket": r"TCK-\\d{6}"}),
        "TOOLRUN_SIGNING_KEY": "k" * 32,
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == [], f"imported after the fork: {imported}"
