"""A submitter the tests kill: makes its `Runtime` and says `ready`, submits the
batch given as JSON on argv, prints its id, then waits to be SIGKILLed
(`python -m tests.support.submitter SPEC [GATE]`: with GATE, it says `imported`
and waits for that file before it makes its `Runtime`); or, with `--results`
first, a client that starts, prints its batch's id and then each call's
status as JSON, and exits. With `DIES_AFTER_ROUNDS` in its environment, it
sends its first stage in rounds of `ROUND_SIZE` messages, and after that
many rounds prints its batch's id and SIGKILLs itself."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from runtime.client import Runtime

READY = "ready"
IMPORTED = "imported"
DIES_AFTER_ROUNDS, ROUND_SIZE = "DIES_AFTER_ROUNDS", "ROUND_SIZE"


def main() -> None:
    waits = sys.argv[1] == "--results"
    spec = json.loads(sys.argv[1 + waits])
    if len(sys.argv) > 2 + waits:  # a gate: say the imports are done, then wait for the file
        print(IMPORTED, flush=True)
        gate = Path(sys.argv[2 + waits])
        while not gate.exists():
            time.sleep(0.005)
    if DIES_AFTER_ROUNDS in os.environ:
        _dies_between_rounds(int(os.environ[DIES_AFTER_ROUNDS]), int(os.environ[ROUND_SIZE]))
    runtime = Runtime.from_env()
    if not waits or len(sys.argv) > 2 + waits:
        print(READY, flush=True)
    handle = runtime.submit(spec.pop("calls"), **spec)
    print(handle.batch_id, flush=True)
    if not waits:
        time.sleep(3600)
    results = handle.results(timeout=spec.get("timeout"))
    print(json.dumps({r.call_id: r.status.value for r in results}), flush=True)
    runtime.close()


def _dies_between_rounds(rounds: int, size: int) -> None:
    """SIGKILL this process once `rounds` rounds of a first stage were sent
    (runtime/transport/cluster.py), as the next is about to be."""
    from runtime.transport import cluster
    from runtime.transport.outbox import CeleryQueue

    cluster.ROUND_MESSAGES = size
    ride, sent = CeleryQueue.ride, []

    def dying(queue, pipe, messages) -> None:
        if len(sent) == rounds:
            print(messages[0].batch_id, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        sent.append(len(messages))
        ride(queue, pipe, messages)

    CeleryQueue.ride = dying


def start(
    stack,
    spec: dict,
    gate: Path | None = None,
    *,
    results: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """A submitter process of `stack` (a FaultStack) for `spec`, started; what
    it says on stderr goes to the file `process.log` (`last_words`). With
    `gate`, it says IMPORTED and makes its Runtime only once that file exists
    (a machine under load may take seconds to import). `results`: it waits
    for its batch's results, prints them and exits (`--results`). `env`: more
    of its environment."""
    env = {**stack.client_env(), **(env or {})}
    log = Path(stack.home) / "logs" / f"submitter-{uuid.uuid4().hex[:8]}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.submitter"]
            + (["--results"] if results else [])
            + [json.dumps(spec)]
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


def spawn(
    stack, spec: dict, patience: float = 60.0, *, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """A submitter process of `stack` for `spec`, and the batch id it printed
    once `submit` had returned ('' if it died first or took over `patience` s).
    `env`: more of its environment."""
    process = start(stack, spec, env=env)
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


def run(stack, spec: dict, *, timeout: float) -> subprocess.CompletedProcess:
    """A client process of `stack` that starts, submits `spec`, prints its
    batch id and its calls' statuses (a JSON line), and exits."""
    return subprocess.run(
        [sys.executable, "-m", "tests.support.submitter", "--results", json.dumps(spec)],
        env=stack.client_env(),
        cwd=stack.client_env()["PYTHONPATH"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


if __name__ == "__main__":
    main()
