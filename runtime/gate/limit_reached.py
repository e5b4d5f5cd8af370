"""A rate or concurrency cap a call may not pass now, as the model and the
ledger are told it: the refusal both points that hold a call to its limits
give, as it is sent and at its start (docs/architecture.md, "Flow control")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.flow.limits import Concurrency, Rate
from runtime.gate.decision import Decision
from runtime.results import endings
from runtime.types import Status, ToolResult


@dataclass(frozen=True)
class Reached:
    """A rate or cap a call may not pass now, as the model and the ledger are
    told it: which one, from which file, and when it allows a call again."""

    entry: Rate | Concurrency
    scope: str
    at: float  # epoch seconds

    @property
    def status(self) -> Status:
        return Status.rate_limited if isinstance(self.entry, Rate) else Status.concurrency_limited

    def content(self, now: float) -> dict[str, Any]:
        e = self.entry
        return {
            "limit": e.name,
            "kind": "rate" if isinstance(e, Rate) else "concurrency",
            "source": e.source,
            "per": e.per,
            "scope": self.scope.split(":", 3)[-1],
            "allows": e.limit if isinstance(e, Rate) else e.max,
            "retry_after_s": round(self._wait(now), 3),
        }

    def _wait(self, now: float) -> float:
        """Until the limit allows a call again; a rate's never past its window
        (`now` may have been read a little before Redis counted the window)."""
        wait = max(0.0, self.at - now)
        if isinstance(self.entry, Rate):
            wait = min(wait, float(self.entry.item.get_expiry()))
        return wait

    def message(self, now: float) -> str:
        wait = self.content(now)["retry_after_s"]
        what = "rate limited" if isinstance(self.entry, Rate) else "concurrency limited"
        return (
            f"{what}: {self.entry.describe()} allows no more calls now, so this call was not "
            f"run. Try again in {wait:g} s (retry_after_s), or do without it."
        )

    def decision(self, now: float) -> Decision:
        kind = "rate" if isinstance(self.entry, Rate) else "concurrency"
        rule = f"{kind}:{self.entry.name}"
        return Decision.deny(self.message(now), rule=rule, source=self.entry.source)

    def result(self, call_id: str, tool: str, now: float) -> ToolResult:
        return endings.limited(call_id, tool, self.status, self.message(now), self.content(now))
