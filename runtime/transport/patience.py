"""A step on Redis tried again until Redis answers or the caller's patience
runs out: a worker publishing an end waits out a Redis restart this way
(docs/architecture.md, "One end per call")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import tenacity

from runtime.keyspace.scripted import LOST

T = TypeVar("T")


def persisting(patience: float, step: Callable[[], T]) -> T:
    """`step()`, tried again until Redis answers or `patience` seconds pass
    (`patient`), whose retrying is built only once the first try is lost:
    it cost more than the try itself."""
    started = time.monotonic()
    try:
        return step()
    except LOST:
        left = patience - (time.monotonic() - started)
        if left <= 0:
            raise
    return patient(left)(step)


def patient(patience: float) -> tenacity.Retrying:
    """Attempts at a step on Redis until it answers or `patience` seconds pass."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(LOST),
        stop=tenacity.stop_after_delay(patience),
        wait=tenacity.wait_random_exponential(multiplier=0.1, max=2),
        reraise=True,
    )
