"""A submitter the tests kill: makes its `Runtime` and says `ready`, submits the
batch given as JSON on argv, prints its id, then waits to be SIGKILLed
(`python -m tests.support.submitter SPEC [GATE]`: with GATE, it says `imported`
and waits for that file before it makes its `Runtime`)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from runtime.client import Runtime

READY = "ready"
IMPORTED = "imported"


def main() -> None:
    spec = json.loads(sys.argv[1])
    if len(sys.argv) > 2:  # a gate: say the imports are done, then wait for the file
        print(IMPORTED, flush=True)
        gate = Path(sys.argv[2])
        while not gate.exists():
            time.sleep(0.005)
    runtime = Runtime.from_env()
    print(READY, flush=True)
    handle = runtime.submit(spec.pop("calls"), **spec)
    print(handle.batch_id, flush=True)
    time.sleep(3600)


def start(stack, spec: dict, gate: Path | None = None) -> subprocess.Popen:
    """A submitter process of `stack` (a FaultStack) for `spec`, started; what
    it says on stderr goes to the file `process.log` (`last_words`). With
    `gate`, it says IMPORTED and makes its Runtime only once that file exists
    (a machine under load may take seconds to import)."""
    env = stack.client_env()
    log = Path(stack.home) / "logs" / f"submitter-{uuid.uuid4().hex[:8]}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.submitter", json.dumps(spec)]
            + ([str(gate)] if gate else []),
            env=env,
            cwd=env["PYTHONPATH"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    process.log = log
    return process


def last_words(process: subprocess.Popen) -> str:
    """The last line a submitter process wrote on stderr (its exception, if it died of one)."""
    said = process.log.read_text(errors="replace").strip().splitlines()
    return said[-1][:300] if said else f"(exit {process.poll()})"


def spawn(stack, spec: dict, patience: float = 60.0) -> tuple[subprocess.Popen, str]:
    """A submitter process of `stack` for `spec`, and the batch id it printed
    once `submit` had returned ('' if it died first or took over `patience` s)."""
    process = start(stack, spec)
    out, give_up = lines(process), time.monotonic() + patience
    for _ in (READY, "the batch id"):
        try:
            line = out.get(timeout=max(0.0, give_up - time.monotonic()))
        except queue.Empty:
            return process, ""
        if line is None:
            return process, ""
    return process, line


def lines(process: subprocess.Popen) -> queue.Queue:
    """What `process` prints, a line at a time, as it comes (None at its end):
    for a test that must not block on a process that may hang or die."""
    out: queue.Queue = queue.Queue()

    def read() -> None:
        for line in process.stdout:
            out.put(line.strip())
        out.put(None)

    threading.Thread(target=read, daemon=True).start()
    return out


if __name__ == "__main__":
    main()
