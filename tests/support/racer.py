"""Submitters that start at one line: each process makes its `Runtime`, says
it is ready, waits for the start file, submits the batch given as JSON, prints
what became of it (the batch id, the refusal or the failure), and leaves the batch to the
cluster (`python -m tests.support.racer SPEC START`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from runtime.client import Runtime
from runtime.errors import InvalidBatch

REPO = Path(__file__).resolve().parents[2]
READY = "ready"


def main() -> None:
    spec, start = json.loads(sys.argv[1]), Path(sys.argv[2])
    runtime = Runtime.from_env()
    print(READY, flush=True)
    while not start.exists():
        time.sleep(0.001)
    try:
        outcome = {"batch_id": runtime.submit(spec.pop("calls"), **spec).batch_id}
    except InvalidBatch as error:
        outcome = {"refused": str(error), "error": type(error).__name__}
    except Exception as error:  # noqa: BLE001 - said, for the test to judge
        outcome = {"failed": str(error), "error": type(error).__name__}
    print(json.dumps(outcome), flush=True)
    runtime.close(cancel=False)


def race(stack, user_settings: Path, specs: list[dict], start: Path) -> list[dict]:
    """Submit each of `specs` from a process of its own, all at once, to
    `stack` (a `StackRecord`), and return what each process printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
    env |= {
        "TOOLRUN_HOME": str(stack.home),
        "TOOLRUN_REDIS_URL": stack.redis_url,
        "TOOLRUN_DATABASE_URL": stack.database_url,
        "TOOLRUN_TOOL_MODULES": "tests.support.tools",
        "TOOLRUN_USER_SETTINGS_FILE": str(user_settings),
        "PYTHONPATH": str(REPO),
    }
    return race_in(env, specs, start)


def race_in(
    env: dict[str, str],
    specs: list[dict],
    start: Path,
    stderr=None,
    ready: Callable[[], None] = lambda: None,
) -> list[dict]:
    """`race` with the submitters' environment given (`FaultStack.client_env`)
    and where their stderr goes (a file; default: this process's); `ready` is
    called once every submitter has its `Runtime`, before they start."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.racer", json.dumps(spec), str(start)],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        for spec in specs
    ]
    try:
        for process in processes:
            assert process.stdout.readline().strip() == READY, "a submitter did not start"
        ready()
        start.touch()
        outcomes = [json.loads(process.stdout.readline()) for process in processes]
        for process in processes:
            process.wait(30)
        return outcomes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


if __name__ == "__main__":
    main()
