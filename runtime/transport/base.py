"""What a batch needs from the world outside the ledger, as an interface: post
signed task messages, announce results and notices, keep the marks of what was
sent and what a worker took, and the batch's cancel flag.

The batch's rules (runtime/batch/progress.py, carried out by
runtime/batch/advance.py) speak only to this and to the ledger.
`transport/cluster.py` implements it on Celery and Redis, for production;
`transport/memory.py` in one process, for tests of the rules
(docs/architecture.md, "The batch's rules on a transport").
"""

from __future__ import annotations

from typing import Any, Protocol

from runtime.types import ToolResult


class Inbox(Protocol):
    """One batch's results as they arrive, to one process."""

    cancelled: bool  # the batch was cancelled, from any process

    def results(self, waiting: set[str], timeout: float) -> list[ToolResult]:
        """Results (or notices: `awaiting_approval`) of `waiting` calls that
        arrive within about `timeout` seconds; a call's end wins over its notice."""
        ...


class Transport(Protocol):
    def post(self, messages: list[dict[str, Any]], *, parallel: bool, chained: bool = False
             ) -> bool:  # fmt: skip
        """Send signed task messages (`chained`: the first carries the others);
        False if the broker could not take them."""
        ...

    def publish(self, batch_id: str, result: ToolResult, *, reply_to: str | None) -> None:
        """Store a call's end where clients and workers find it, and announce it."""
        ...

    def announce(self, batch_id: str, notice: ToolResult, *, reply_to: str | None) -> None:
        """Announce a notice (a call waiting for approval); nothing is stored."""
        ...

    def mark_sent(self, batch_id: str, call_ids: list[str], *, again: bool = False) -> list[str]:
        """Mark calls sent now; the ones this call marked (`again`: all of them),
        so that two processes moving a batch on never both send a call."""
        ...

    def sent(self, batch_id: str) -> dict[str, float]:
        """When each call was last sent (epoch seconds); empty after a broker loss."""
        ...

    def started(self, batch_id: str) -> set[str]:
        """Calls a worker has taken (reads and idempotent calls count here)."""
        ...

    def keep_plan(self, batch_id: str, plan: dict[str, Any]) -> None:
        """A copy of the batch's plan, so it goes on while the ledger is away."""
        ...

    def plan(self, batch_id: str) -> dict[str, Any] | None: ...

    def ends(self, batch_id: str) -> dict[str, ToolResult]:
        """The ends announced so far (the ledger holds them once it is there)."""
        ...

    def watch(self, batch_id: str) -> Inbox:
        """Start hearing a batch's results; call before sending anything."""
        ...

    def unwatch(self, batch_id: str) -> None: ...

    def cancelled(self, batch_id: str) -> bool:
        """Whether the batch was cancelled (False when that cannot be known)."""
        ...

    def cancel(self, batch_id: str, *, by: str) -> None:
        """Mark the batch cancelled: no call of it starts from now on."""
        ...

    def close(self) -> None: ...
