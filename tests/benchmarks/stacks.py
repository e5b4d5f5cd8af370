"""Reading py-spy's raw (collapsed) stacks: where one process spent its samples,
per call, in toolrun's code and in the libraries it calls into.

A line of `py-spy record --format raw` is `frame;frame;...;leaf count`, each
frame `function (path:line)`, the line being where that frame was when sampled:
for every frame but the leaf, the call site of the next one.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

OURS = re.compile(r"\((?:.*/)?(runtime|workers|tests/benchmarks)/[^()]*\)$")
FRAME = re.compile(r"^(?P<function>.*) \((?P<path>.*?)(?::(?P<line>\d+))?\)$")


@dataclass
class Profile:
    """Samples of one process, with per-call costs in milliseconds."""

    samples: int
    per_call_ms: float  # milliseconds a sample stands for, divided by calls
    ours: Counter  # our frames (call sites), counted once per stack: inclusive
    boundaries: Counter  # "our frame -> first foreign callee" (or "(self)"): where time leaves us
    leaves: Counter  # leaf frames anywhere: self time
    in_ours: int  # samples with any of our frames on the stack

    def ms(self, count: int) -> float:
        return count * self.per_call_ms


def load(path: Path, *, rate: int, calls: int, only_ours: bool = False) -> Profile:
    """Summarise one raw file; `only_ours` drops stacks without toolrun frames
    (idle Celery and pool threads, when recorded with --idle)."""
    ours, boundaries, leaves = Counter(), Counter(), Counter()
    samples = in_ours = 0
    text = path.read_text() if path.exists() else ""
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames, count = [_short(frame) for frame in stack.split(";")], int(count)
        mine = [index for index, frame in enumerate(frames) if OURS.search(frame)]
        if only_ours and not mine:
            continue
        samples += count
        leaves[frames[-1]] += count
        if not mine:
            continue
        in_ours += count
        for frame in set(frames[index] for index in mine):
            ours[frame] += count
        deepest = mine[-1]
        callee = frames[deepest + 1] if deepest + 1 < len(frames) else "(self)"
        boundaries[f"{frames[deepest]} -> {_function(callee)}"] += count
    return Profile(samples, 1000.0 / rate / max(calls, 1), ours, boundaries, leaves, in_ours)


def _short(frame: str) -> str:
    """`function (runtime/execution/executor.py:78)`: paths cut to the repo or site-packages."""
    found = FRAME.match(frame.strip())
    if not found:
        return frame.strip()
    path = found["path"]
    for marker in ("site-packages/", "/work/main/", "lib/python3."):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    line = f":{found['line']}" if found["line"] else ""
    return f"{found['function']} ({path}{line})"


def _function(frame: str) -> str:
    """A callee without its line: the library function the time went into."""
    found = FRAME.match(frame)
    return f"{found['function']} ({found['path']})" if found else frame


def report(name: str, profile: Profile, top: int = 12) -> str:
    lines = [
        f"## {name}: {profile.samples} samples, {profile.ms(profile.samples):.2f} ms/call "
        f"({profile.ms(profile.in_ours):.2f} ms/call with toolrun frames on the stack)",
        "",
        "where time leaves toolrun's code (ms/call, our frame -> callee):",
    ]
    lines += _rows(profile, profile.boundaries, top)
    lines += ["", "toolrun frames, inclusive (ms/call):"]
    lines += _rows(profile, profile.ours, top)
    lines += ["", "leaf frames, self (ms/call):"]
    lines += _rows(profile, profile.leaves, top)
    return "\n".join(lines) + "\n"


def _rows(profile: Profile, counter: Counter, top: int) -> list[str]:
    return [f"  {profile.ms(count):7.3f}  {key}" for key, count in counter.most_common(top)]
