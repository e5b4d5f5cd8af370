"""What a batch needs from the world outside it, as an interface: send admitted
calls, hear their results, read and set the batch's cancel flag, and ring or
wait for an approval's answer.

`BatchRun` (runtime/batch/run.py) holds the batch's rules and speaks only to
this. `transport/celery.py` implements it on Celery and Redis, for production;
`transport/memory.py` implements it in one process, for tests of the rules
(docs/architecture.md, "The batch's rules on a transport").
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from runtime.gate.admission import Admitted
from runtime.gate.policy import Policy
from runtime.types import Batch, ToolResult


class Inbox(Protocol):
    """One batch's results as they arrive."""

    cancelled: bool  # the batch was cancelled, from any process

    def results(self, waiting: set[str], timeout: float) -> list[ToolResult]:
        """Results of `waiting` calls that arrive within about `timeout` seconds."""
        ...


class Sender(Protocol):
    """Sends one batch's calls."""

    def send(
        self,
        admitted: list[Admitted],
        approved_by: dict[str, str],
        deadline: Callable[[], float],
        *,
        chained: bool = False,
    ) -> list[Admitted]:
        """Send each call (`chained`: as one chain of ordered steps, in this
        order); returns those not taken before `deadline()` (monotonic)."""
        ...


class Waiter(Protocol):
    def wait(self, timeout: float) -> None:
        """Return when rung, or after `timeout` seconds."""
        ...


class Doorbell(Protocol):
    """How an approval's answer reaches the batch waiting for it."""

    def ring(self, batch_id: str, call_id: str) -> None: ...

    def listening(self, batch_id: str) -> AbstractContextManager[Waiter]: ...

    def stash(self, batch_id: str, call_id: str, arguments: Any) -> None:
        """Keep arguments an approver changed for the batch to pick up."""
        ...

    def unstash(self, batch_id: str, call_id: str) -> Any | None: ...


class Transport(Doorbell, Protocol):
    def sender(self, batch: Batch, policy: Policy) -> Sender: ...

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
