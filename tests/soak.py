"""Soak: batches run without pause on a stack of their own while faults are
injected at random (SIGKILL of a reads worker, of an effects worker or of one
of its pool processes, a Redis restart, a ledger cut, and the process that
submitted a batch, which then goes on in the cluster); a supervisor starts a
replacement for every worker killed, as a restart policy would. Some calls
are stuck on purpose: C code holding the GIL on either queue (its process is
killed at the hard limit), a backtracking `re`, a side effect sleeping past
its timeout.

    python -m tests.soak [--minutes 3] [--seed N] [--postgres URL]

Prints the faults injected, the calls submitted and those in flight when a
fault hit, and the figures that must be 0: calls left without exactly one
result, side effects that ran twice, and side effects of one batch that
overlapped. Exits 1 if any is not 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from tests.support.faults import FaultStack, Relay
from tests.support.submitter import spawn
from tests.support.tools import marks

WRITES = {"allow": ["bump", "slow_bump", "hold_gil_write", "overrun_write"]}
STUCK = ["hold_gil_read", "hold_gil_write", "backtrack_read", "overrun_write"]
SUBMITTERS = 3
FAULTS = [
    "kill reads worker",
    "kill effects worker",
    "kill pool process",
    "restart redis",
    "cut ledger",
]
KILLED_SUBMITTERS = 0.2  # the share of batches whose submitting process is SIGKILLed


class Tally:
    """What the submitters saw, shared between threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches = self.calls = self.in_flight = self.peak = 0
        self.in_flight_at_faults = 0
        self.missing = self.duplicated = self.twice = self.overlapped = 0
        self.statuses: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()  # why calls ended neither ok nor skipped
        self.faults: Counter[str] = Counter()
        self.errors: list[str] = []


def batch_of(rng: random.Random, number: int) -> list[dict]:
    """Reads and side effects in a random order; every side effect has a label of its own."""
    calls = []
    for index in range(rng.randint(3, 10)):
        call_id, kind = f"c{index}", rng.random()
        if kind < 0.55:
            arguments = {"label": f"{number}.{index}", "seconds": rng.choice([0, 0.1, 0.3, 0.8])}
            calls.append({"id": call_id, "name": "nap", "arguments": arguments})
        elif kind < 0.75:
            calls.append({"id": call_id, "name": "bump", "arguments": {"label": call_id}})
        elif kind < 0.87:
            arguments = {"label": call_id, "seconds": rng.choice([0.2, 0.6])}
            calls.append({"id": call_id, "name": "slow_bump", "arguments": arguments})
        elif kind < 0.9:
            arguments = {"label": call_id, "seconds": 2.0}  # past the stuck tools' timeout
            calls.append({"id": call_id, "name": rng.choice(STUCK), "arguments": arguments})
        else:
            calls.append({"id": call_id, "name": "echo", "arguments": {"text": call_id}})
    return calls


def submitter(
    stack: FaultStack, runtime, base: Path, tally: Tally, stop: threading.Event, seed: int
) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        with tally.lock:
            tally.batches += 1
            number = tally.batches
        calls = batch_of(rng, number)
        workspace = Path(tempfile.mkdtemp(dir=base, prefix=f"b{number}-"))
        try:
            on_error = rng.choice(["stop", "continue"])
            if rng.random() < KILLED_SUBMITTERS:  # the batch must go on without its submitter
                handle = killed_submitter(stack, runtime, tally, rng, calls, workspace, on_error)
            else:
                handle = runtime.submit(
                    calls,
                    mode="auto",
                    workspace=workspace,
                    rules=WRITES,
                    on_error=on_error,
                    timeout=30,
                )
        except Exception as error:  # noqa: BLE001 - counted, and the soak goes on
            with tally.lock:
                tally.errors.append(f"submit: {type(error).__name__}: {error}")
            continue
        with tally.lock:
            tally.calls += len(calls)
            tally.in_flight += len(calls)
            tally.peak = max(tally.peak, tally.in_flight)
        seen: Counter[str] = Counter()
        try:
            for result in handle.stream(timeout=60, notices=False):
                seen[result.call_id] += 1
                with tally.lock:
                    tally.in_flight -= 1
                    tally.statuses[result.status.value] += 1
                    if result.status.value not in ("ok", "skipped"):
                        tally.reasons[result.model_message.split(";")[0][:90]] += 1
        except Exception as error:  # noqa: BLE001 - a result stream must never raise
            with tally.lock:
                tally.errors.append(f"stream: {type(error).__name__}: {error}")
        ran = Counter(mark["label"] for mark in marks(workspace, "effects"))
        with tally.lock:
            tally.missing += sum(1 for call in calls if seen[call["id"]] == 0)
            tally.duplicated += sum(count - 1 for count in seen.values() if count > 1)
            tally.twice += sum(1 for count in ran.values() if count > 1)
            tally.overlapped += overlaps(workspace)
            tally.in_flight -= sum(1 for call in calls if seen[call["id"]] == 0)


def killed_submitter(
    stack: FaultStack,
    runtime,
    tally: Tally,
    rng: random.Random,
    calls: list[dict],
    workspace: Path,
    on_error: str,
):
    """Submit from a process of its own, SIGKILL it soon after, and attach."""
    spec = {
        "calls": calls,
        "mode": "auto",
        "workspace": str(workspace),
        "rules": WRITES,
        "on_error": on_error,
        "timeout": 30,
    }
    process, batch_id = spawn(stack, spec)
    time.sleep(rng.uniform(0, 1.0))
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    with tally.lock:
        tally.faults["kill submitter"] += 1
    return runtime.attach(batch_id)


def overlaps(workspace: Path) -> int:
    """Side effects of one batch that started before the one before them ended
    (slow_bump and overrun_write stamp both edges; a killed one has no end)."""
    spans = {m["label"]: [m["at"], None] for m in marks(workspace, "effects")}
    for mark in marks(workspace, "effects_done"):
        spans[mark["label"]][1] = mark["at"]
    for mark in marks(workspace, "stamps"):
        span = spans.setdefault(mark["label"], [None, None])
        span[0 if mark["edge"] == "start" else 1] = mark["at"]
    ordered = sorted((start, end) for start, end in spans.values() if start is not None)
    return sum(
        1
        for (_, end), (start, _) in zip(ordered, ordered[1:], strict=False)
        if end is not None and start < end
    )


def injector(stack: FaultStack, tally: Tally, stop: threading.Event, rng: random.Random) -> None:
    """One fault every 4 to 9 s, every kind once per round, in a random order."""
    round_: list[str] = []
    while not stop.wait(rng.uniform(4.0, 9.0)):
        round_ = round_ or rng.sample(FAULTS, len(FAULTS))
        fault = round_.pop()
        if not ready(stack, fault):  # its target is down (a replacement is starting)
            round_.insert(0, fault)
            continue
        with tally.lock:
            tally.in_flight_at_faults += tally.in_flight
        try:
            inject(stack, fault, rng)
        except Exception as error:  # noqa: BLE001 - a fault that could not be injected
            with tally.lock:
                tally.errors.append(f"{fault}: {type(error).__name__}: {error}")
            continue
        with tally.lock:
            tally.faults[fault] += 1
        print(
            f"  {time.strftime('%H:%M:%S')} {fault}; calls in flight: {tally.in_flight}", flush=True
        )


def ready(stack: FaultStack, fault: str) -> bool:
    if fault == "kill reads worker":
        return bool(stack.workers("reads"))
    if fault == "kill effects worker":
        return bool(stack.workers("effects"))
    if fault == "kill pool process":
        workers = stack.workers("reads") + stack.workers("effects")
        return any(stack.pool_processes(w) for w in workers)
    return True


def inject(stack: FaultStack, fault: str, rng: random.Random) -> None:
    if fault == "kill reads worker":
        stack.kill_worker(rng.choice(stack.workers("reads")))
    elif fault == "kill effects worker":
        stack.kill_worker(rng.choice(stack.workers("effects")))
    elif fault == "kill pool process":
        workers = stack.workers("reads") + stack.workers("effects")
        pids = [pid for w in workers for pid in stack.pool_processes(w)]
        stack.kill_pool_process(rng.choice(pids))
    elif fault == "restart redis":
        stack.restart_redis(down=rng.uniform(0.2, 2.0))
    else:
        with stack.ledger_cut():
            time.sleep(rng.uniform(1.0, 4.0))


def report(tally: Tally, seconds: float, stack: FaultStack) -> int:
    figures = {
        "seconds": round(seconds),
        "batches": tally.batches,
        "calls submitted": tally.calls,
        "kills injected": stack.kills,
        "redis restarts injected": stack.restarts,
        "ledger cuts injected": stack.cuts,
        "faults": dict(tally.faults),
        "calls in flight when a fault hit (sum)": tally.in_flight_at_faults,
        "peak calls in flight": tally.peak,
        "statuses": dict(tally.statuses.most_common()),
        "why not ok": dict(tally.reasons.most_common(8)),
        "missing results": tally.missing,
        "extra results": tally.duplicated,
        "side effects run twice": tally.twice,
        "side effects overlapping in a batch": tally.overlapped,
        "errors": tally.errors[:10],
    }
    print(json.dumps(figures, indent=2, ensure_ascii=False))
    failed = tally.missing or tally.duplicated or tally.twice or tally.overlapped or tally.errors
    print("soak: FAILED" if failed else "soak: passed (0 missing, 0 run twice, 0 overlapping)")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="ledger on a fresh PostgreSQL database "
        "behind a relay the soak cuts (default: SQLite, locked)",
    )
    options = parser.parse_args(argv)
    seed = options.seed if options.seed is not None else random.randrange(1 << 30)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("toolrun").setLevel(logging.CRITICAL)  # the faults are expected
    print(f"soak: {options.minutes:g} min, seed {seed}", flush=True)
    with ExitStack() as cleanup:
        base = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="toolrun-soak-")))
        user_settings = base / "user-settings.json"
        user_settings.write_text(json.dumps({"trusted_workspaces": [str(base)]}))
        relay = database_url = None
        if options.postgres:
            from tests.support.postgres import fresh_database

            relay, database_url = Relay.in_front_of(
                cleanup.enter_context(fresh_database(options.postgres))
            )
            cleanup.callback(relay.close)
        stack = FaultStack(
            base / "home",
            user_settings=user_settings,
            appendonly=True,
            reads_workers=2,
            effects_workers=2,
            database_url=database_url,
            relay=relay,
        )
        stack.start()
        cleanup.callback(stack.stop)
        runtime = stack.runtime()
        cleanup.callback(runtime.close)
        for queue in ("reads", "effects"):
            cleanup.enter_context(stack.keep_workers(queue, 2))
        tally, stop, rng = Tally(), threading.Event(), random.Random(seed)
        threads = [
            threading.Thread(
                target=submitter, args=(stack, runtime, base, tally, stop, seed + index)
            )
            for index in range(SUBMITTERS)
        ]
        threads.append(threading.Thread(target=injector, args=(stack, tally, stop, rng)))
        began = time.monotonic()
        for thread in threads:
            thread.start()
        try:
            time.sleep(options.minutes * 60)
        except KeyboardInterrupt:
            print("soak: interrupted, finishing the batches under way", flush=True)
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        return report(tally, time.monotonic() - began, stack)


if __name__ == "__main__":
    sys.exit(main())
