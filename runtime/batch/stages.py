"""Batch → stages, so that a batch's effects are those of running its calls in
the model's order, except that consecutive read-only calls run at once.

`[read a, read b, write a, read a]` → `{read a ∥ read b} → write a → read a`:
the last read sees the write. (The seed article runs all reads first, which
returns stale reads.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")


@dataclass(frozen=True)
class Stage(Generic[Item]):
    """Calls that may start together. `parallel` stages hold only reads; an
    ordered stage holds exactly one side-effecting (or unknown-risk) call."""

    parallel: bool
    calls: tuple[Item, ...]


def plan(calls: Iterable[Item], is_read: Callable[[Item], bool]) -> list[Stage[Item]]:
    """Consecutive reads form one parallel stage; every other call is its own stage."""
    stages: list[Stage[Item]] = []
    group: list[Item] = []
    for call in calls:
        if is_read(call):
            group.append(call)
            continue
        if group:
            stages.append(Stage(True, tuple(group)))
            group = []
        stages.append(Stage(False, (call,)))
    if group:
        stages.append(Stage(True, tuple(group)))
    return stages
