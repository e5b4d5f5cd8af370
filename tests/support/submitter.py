"""A submitter the tests kill: submits the batch given as JSON on argv, prints
its id, then waits to be SIGKILLed (`python -m tests.support.submitter SPEC`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from runtime.client import Runtime

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    spec = json.loads(sys.argv[1])
    runtime = Runtime.from_env()
    handle = runtime.submit(spec.pop("calls"), **spec)
    print(handle.batch_id, flush=True)
    time.sleep(3600)


def spawn(stack, spec: dict) -> tuple[subprocess.Popen, str]:
    """A submitter process of `stack` (a FaultStack) for `spec`, and the batch
    id it printed once `submit` had returned."""
    settings = stack.settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
    env |= {
        "TOOLRUN_HOME": str(settings.home),
        "TOOLRUN_REDIS_URL": stack.redis_url,
        "TOOLRUN_DATABASE_URL": settings.ledger_url,
        "TOOLRUN_TOOL_MODULES": stack.env["TOOLRUN_TOOL_MODULES"],
        "TOOLRUN_USER_SETTINGS_FILE": str(settings.user_settings_file),
        "PYTHONPATH": str(REPO),
    }
    if settings.broker_url:
        env["TOOLRUN_BROKER_URL"] = settings.broker_url
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.submitter", json.dumps(spec)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


if __name__ == "__main__":
    main()
