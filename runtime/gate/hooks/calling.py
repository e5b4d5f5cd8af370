"""Asking one hook, whatever its kind: the request out, the answer parsed, the
latency measured, a failure kept as text, and a span in the trace."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from runtime import tracing
from runtime.errors import HookFailed
from runtime.gate.hooks import command_hook, http_hook, python_hook
from runtime.gate.hooks.answer import Answer, parse
from runtime.gate.hooks.declaration import Hook

KINDS = {"python": python_hook.ask, "http": http_hook.ask, "command": command_hook.ask}


@dataclass(frozen=True)
class Consulted:
    hook: Hook
    answer: Answer  # no opinion when it failed
    latency_ms: float
    failure: str | None = None
    non_blocking: bool = False  # a failure that blocks nothing, whatever `on_failure` says

    @property
    def failed_closed(self) -> bool:
        return (
            self.failure is not None and not self.non_blocking and self.hook.on_failure == "closed"
        )

    def fields(self) -> dict[str, Any]:
        """The columns of its ledger row (an event of kind `hook`)."""
        return {
            "rule": f"hook:{self.hook.name}",
            "source": self.hook.source,
            "reason": self.failure or self.answer.reason or None,
            "detail": self.detail(),
        }

    def detail(self) -> dict[str, Any]:
        """What the ledger's hook row keeps: who answered what, how fast."""
        found: dict[str, Any] = {
            "hook": self.hook.name,
            "when": self.hook.when,
            "kind": self.hook.kind,
            "level": self.hook.level,
            "latency_ms": self.latency_ms,
            **self.answer.as_dict(),
        }
        if self.failure is not None:
            found["failure"] = self.failure
            found["on_failure"] = "ignored" if self.non_blocking else self.hook.on_failure
        return found


def consult(hook: Hook, request: dict[str, Any], key: bytes, tool: str) -> Consulted:
    with tracing.hook_span(hook.name, hook.when, hook.kind, tool) as span:
        started = time.perf_counter()
        failure, non_blocking, answer = None, False, Answer()
        try:
            answer = parse(KINDS[hook.kind](hook, request, key), hook.when)
        except HookFailed as error:
            failure, non_blocking = str(error), error.non_blocking
        latency = round((time.perf_counter() - started) * 1000, 3)
        span["latency_ms"] = latency
        span |= {k: v for k, v in answer.as_dict().items() if isinstance(v, str | bool)}
        if failure is not None:
            span["failure"] = failure
    return Consulted(hook, answer, latency, failure, non_blocking)
