"""A process whose clock is wrong on purpose, for the tests of one clock
(docs/architecture.md, "Leases"): a worker started with `SKEW` in its
environment reads `time.time()` that many seconds off, as a host whose clock
drifted would. The fault tools' module calls this as it is imported, so a
worker of a fault stack skews itself before it runs anything."""

from __future__ import annotations

import os
import time

SKEW = "TOOLRUN_TEST_CLOCK_SKEW"


def skew_from_environment() -> None:
    seconds = float(os.environ.get(SKEW) or 0)
    if not seconds or getattr(time.time, "skewed", False):
        return
    real = time.time

    def skewed() -> float:
        return real() + seconds

    skewed.skewed = True  # type: ignore[attr-defined]
    time.time = skewed
