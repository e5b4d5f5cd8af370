"""A submitter the tests kill: submits the batch given as JSON on argv, prints
its id, then waits to be SIGKILLed (`python -m tests.support.submitter SPEC`);
or, with `--results` first, a client that starts, prints its batch's id and
then each call's status as JSON, and exits."""

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
    waits = sys.argv[1] == "--results"
    spec = json.loads(sys.argv[-1])
    runtime = Runtime.from_env()
    handle = runtime.submit(spec.pop("calls"), **spec)
    print(handle.batch_id, flush=True)
    if not waits:
        time.sleep(3600)
    results = handle.results(timeout=spec.get("timeout"))
    print(json.dumps({r.call_id: r.status.value for r in results}), flush=True)
    runtime.close()


def spawn(stack, spec: dict) -> tuple[subprocess.Popen, str]:
    """A submitter process of `stack` (a FaultStack) for `spec`, and the batch
    id it printed once `submit` had returned."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.submitter", json.dumps(spec)],
        env=_env(stack),
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


def run(stack, spec: dict, *, timeout: float) -> subprocess.CompletedProcess:
    """A client process of `stack` that starts, submits `spec`, prints its
    batch id and its calls' statuses (a JSON line), and exits."""
    return subprocess.run(
        [sys.executable, "-m", "tests.support.submitter", "--results", json.dumps(spec)],
        env=_env(stack),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _env(stack) -> dict[str, str]:
    settings = stack.settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
    env |= {
        "TOOLRUN_HOME": str(settings.home),
        "TOOLRUN_REDIS_URL": stack.redis_url,
        "TOOLRUN_DATABASE_URL": settings.ledger_url,
        "TOOLRUN_TOOL_MODULES": stack.env["TOOLRUN_TOOL_MODULES"],
        "TOOLRUN_USER_SETTINGS_FILE": str(settings.user_settings_file),
        "TOOLRUN_LEDGER_RETRY_SECONDS": str(settings.ledger_retry_seconds),
        "PYTHONPATH": str(REPO),
    }
    return env


if __name__ == "__main__":
    main()
