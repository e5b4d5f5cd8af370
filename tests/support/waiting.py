"""Waiting on a condition instead of a clock: a test polls for the fact it needs
(a row written, a process gone, a key set) and fails with what it waited for when
the fact never comes, so it passes as fast as the machine allows and no faster."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], timeout: float = 30.0, what: str = "condition", every: float = 0.02
) -> T:
    """`condition()`'s first truthy value, asked every `every` seconds; an
    AssertionError naming `what` if none comes within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(every)
    return found
