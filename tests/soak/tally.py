"""What the soak saw, shared between its threads, and the report of it: the
figures that must be 0 and those that only say how hard the run was."""

from __future__ import annotations

import json
import threading
from collections import Counter

EXAMPLES = 3  # examples kept of each broken figure


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches = self.calls = self.in_flight = self.peak = 0
        self.in_flight_at_faults = 0
        self.missing = self.duplicated = self.twice = self.overlapped = 0
        self.statuses: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()  # why calls ended neither ok nor skipped
        self.faults: Counter[str] = Counter()
        self.broken: Counter[str] = Counter()  # the ledger's and the new faults' checks: must be 0
        self.examples: Counter[str] = Counter()
        self.figures: Counter[str] = Counter()  # counted, not judged
        self.sweep_gaps: list[float] = []  # seconds a killed sweep holder kept the lock
        self.dead_holders: set[str] = set()
        self.followed: list[tuple] = []  # (batch id, calls, results streamed, workspace)
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []

    def number(self) -> int:
        """A new batch's number."""
        with self.lock:
            self.batches += 1
            return self.batches

    def spawn(self, target, *args) -> None:
        """Run `target(*args)` on a thread of its own, joined before the report."""
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self.lock:
            self.threads.append(thread)
        thread.start()

    def error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)

    def broke(self, what: str, example: str = "", count: int = 1) -> None:
        """`count` of `what`, a figure that must be 0; `example` goes with the errors."""
        if count <= 0:
            return
        with self.lock:
            self.broken[what] += count
            self.examples[what] += 1
            if example and self.examples[what] <= EXAMPLES:
                self.errors.append(f"{what}: {example}")


def report(tally: Tally, seconds: float, stack, setup: dict) -> int:
    gaps = sorted(tally.sweep_gaps)
    figures = {
        "seconds": round(seconds),
        "stack": setup,
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
        "seen": dict(tally.figures),
        "seconds a killed sweep holder kept the lock": [round(g, 1) for g in gaps],
        "missing results": tally.missing,
        "extra results": tally.duplicated,
        "side effects run twice": tally.twice,
        "side effects overlapping in a batch": tally.overlapped,
        "broken": dict(tally.broken),
        "errors": tally.errors[:12],
    }
    print(json.dumps(figures, indent=2, ensure_ascii=False))
    failed = (
        tally.missing
        or tally.duplicated
        or tally.twice
        or tally.overlapped
        or sum(tally.broken.values())
        or tally.errors
    )
    passed = "0 missing, 0 run twice, 0 overlapping, one end and one decision per call"
    print("soak: FAILED" if failed else f"soak: passed ({passed})")
    return 1 if failed else 0
