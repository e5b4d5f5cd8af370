"""CPU time per call, per process, for each side of a figure: where a side's
time goes when the machine's cores are the limit (as on a 2-core machine).

Read from /proc (user + system time of a process and its children, so a
prefork worker's pool process counts, and of the children it has reaped)
before and after each repetition; the client is this process. Both sides are
sampled in the same way.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[Path]:
    """The /proc directories of `pid` and its living descendants."""
    found, todo, seen = [], [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        proc = Path(f"/proc/{current}")
        if not proc.exists():
            continue
        found.append(proc)
        for task in proc.glob("task/*/children"):
            try:
                todo += [int(child) for child in task.read_text().split()]
            except OSError:
                pass
    return found


def process_seconds(pid: int) -> float:
    """CPU seconds of `pid` and its descendants (0 for one that is gone), and
    of the descendants they have reaped: a prefork pool process replaced
    during a repetition (`worker_max_tasks_per_child`) takes its CPU along
    into its parent's count instead of out of the measurement."""
    total = 0.0
    for proc in process_tree(pid):
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(value) for value in fields[11:15]) / TICK  # utime stime cutime cstime
    return total


class Meter:
    """CPU seconds spent in each named process while a side runs."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.spent: dict[str, dict[str, float]] = {}
        self.calls: dict[str, int] = {}

    def measure(self, side: str, calls: int, work):
        """`work()`, charging the CPU every process spent meanwhile to `side`."""
        before = self._sample()
        value = work()
        after = self._sample()
        spent = self.spent.setdefault(side, {})
        for name in after:
            spent[name] = spent.get(name, 0.0) + after[name] - before[name]
        self.calls[side] = self.calls.get(side, 0) + calls
        return value

    def per_call_ms(self) -> dict[str, dict[str, float]]:
        """Milliseconds of CPU per call, per side and process (idle ones left out)."""
        found = {}
        for side, spent in self.spent.items():
            calls = max(1, self.calls[side])
            rows = {name: round(1000 * seconds / calls, 3) for name, seconds in spent.items()}
            found[side] = {name: ms for name, ms in rows.items() if ms >= 0.05}
        return found

    def _sample(self) -> dict[str, float]:
        return {"client": time.process_time()} | {
            name: process_seconds(pid) for name, pid in self.pids.items()
        }
