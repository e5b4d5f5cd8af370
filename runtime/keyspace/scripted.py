"""A Redis client whose Lua scripts run as EVALSHA on pipelines, its
connection errors (`LOST`, which every Redis-facing part catches by this
name) raised as toolrun's (docs/architecture.md, "Flow control")."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.client import Pipeline
from redis.commands.core import Script
from redis.exceptions import NoScriptError

from runtime.errors import StateUnavailable

F = TypeVar("F", bound=Callable[..., Any])
LOST = (redis.ConnectionError, redis.TimeoutError)  # the connection to Redis was lost


def reached(method: F) -> F:
    """Redis's connection errors, as toolrun's (`StateUnavailable`)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except LOST as error:
            raise StateUnavailable(f"flow control: {error}") from error

    return wrapper  # type: ignore[return-value]


class Scripted:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._scripts: list[Script] = []
        self._loaded = False

    def script(self, text: str) -> Script:
        found = self.client.register_script(text)
        self._scripts.append(found)
        return found

    @reached
    def load(self) -> None:
        """Every script in Redis's cache (once per process, and again after
        Redis lost them): then they may ride any pipeline as EVALSHA."""
        if not self._loaded:
            with self.client.pipeline(transaction=False) as pipe:
                for script in self._scripts:
                    pipe.script_load(script.script)
                pipe.execute()
            self._loaded = True

    def lost(self, answers: list[Any]) -> bool:
        """Whether Redis had lost the scripts (`answers` of a pipeline run
        without raising): they are loaded again next time."""
        if any(isinstance(a, NoScriptError) for a in answers):
            self._loaded = False
        return not self._loaded

    def _pipelined(self, build: Callable[[Pipeline], object]) -> list[Any]:
        """The answers of what `build` puts on a pipeline, in one round trip.
        Scripts go as EVALSHA: redis-py's `Script` on a pipeline asks SCRIPT
        EXISTS first, a round trip more each time. They are loaded once per
        process, and again if Redis lost them (a restart: then none of them
        ran, and the plain commands put here are idempotent)."""
        for attempt in (0, 1):
            self.load()
            with self.client.pipeline(transaction=False) as pipe:
                build(pipe)
                try:
                    return pipe.execute()
                except NoScriptError:
                    if attempt:
                        raise
                    self._loaded = False
        raise AssertionError("unreachable")
