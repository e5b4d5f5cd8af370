"""The hand-over between two steps of a chain that runs in one task
(docs/architecture.md, "A chain in one task"): the end of the step that has
run is written in the same ledger transaction as the claim of the step after
it, and published only once that transaction has committed. If the next step
claims nothing, or that transaction fails, the end is written alone first, so
that a failed claim never costs the step before its end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from runtime.errors import LedgerUnavailable
from runtime.ledger.claims import Begun, Start
from runtime.ledger.ends import CallEnd
from runtime.ledger.store import Ledger
from runtime.types import CallMessage, ToolResult

log = logging.getLogger("toolrun.executor")


@dataclass
class Previous:
    """The chain step before the one about to run: it ran under a claim, and
    its end is written in the transaction that claims this step
    (`Ledger.end_and_claim`), or alone first if this step claims nothing.
    `ended` is told once it is written, whether it ended the call, and
    publishes it: never before its end is committed (docs/architecture.md,
    "A chain in one task"); and the call id of the step claimed with it, if
    any, whose lease it takes in the same round trip (`leased`)."""

    batch_id: str
    result: ToolResult
    ended: Callable[[bool | None, str | None], Any]
    settled: bool = False
    leased: str | None = None
    # What `ended` said of the step claimed with it (`Worker.publish`: the end
    # published for it, read in the publish's round trip), if anything.
    recalled: Any = None

    def settle(self, ledger: Ledger) -> None:
        """Write the end alone (now, or from the buffer) and tell `ended`."""
        if not self.settled:
            ended: list[bool] = []
            write = lambda: ended.append(ledger.record_result(self.batch_id, self.result))  # noqa: E731
            ledger.eventually(write)
            self.told(ended[0] if ended else None)

    def told(self, ended: bool | None, lease: str | None = None) -> None:
        self.settled, self.leased = True, lease
        self.recalled = self.ended(ended, lease)

    def published(self, call_id: str) -> tuple[bool, ToolResult | None]:
        """(known, end) of the end published for `call_id`, the step claimed
        with this one's end, as its publish read it: not known if it did not."""
        found = self.recalled if self.leased == call_id else None
        if found is None or not getattr(found, "known", False):
            return False, None
        return True, found.result


def settle(previous: Previous | None, ledger: Ledger) -> None:
    """The end of the step before written alone, if there is one and it waits."""
    if previous is not None:
        previous.settle(ledger)


@contextmanager
def settled_after(previous: Previous | None, ledger: Ledger) -> Iterator[None]:
    """However the next step's run ends (an exception too), the step before
    has its end written, and published, when it is over."""
    try:
        yield
    finally:
        settle(previous, ledger)


def claim_after(
    ledger: Ledger, message: CallMessage, worker: str | None, previous: Previous | None
) -> Begun:
    """The claim, with the end of the step before in the same transaction. If
    that transaction fails, the end is written on its own first (or kept for
    when the ledger is back), so a failed claim never costs it; then the claim
    is tried alone."""
    batch_id, call_id = message.batch_id, message.call_id
    if previous is None or previous.settled:
        return ledger.claim(batch_id, call_id, worker=worker)
    end = CallEnd(previous.batch_id, previous.result, redactor=ledger.redactor)
    try:
        ended, begun = ledger.end_and_claim(end, batch_id, call_id, worker=worker)
    except LedgerUnavailable:
        ledger.later(lambda: ledger.record_result(previous.batch_id, previous.result))
        previous.told(None)
        raise
    except Exception as error:  # noqa: BLE001 - the end alone, then the claim alone
        log.error("ending %s with the claim of %s failed: %s", end.call_id, call_id, error)
        previous.settle(ledger)
        return ledger.claim(batch_id, call_id, worker=worker)
    previous.told(ended, call_id if begun.start is Start.run else None)
    return begun
