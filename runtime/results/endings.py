"""The results the client gives calls that no worker answered: the batch's
deadline passed or it was cancelled while they ran, or they never ran (an
ordered step failed before them, a cancel, the deadline before their turn).
Each says what is known, so the model can tell "did not run" from "may have".
"""

from __future__ import annotations

from runtime.ledger.store import EventKind
from runtime.results import formatter as results
from runtime.types import Status, ToolCall, ToolResult

CANCELLED = "the batch was cancelled"


def abandoned(call: ToolCall, *, read: bool, cancelled: bool, cause: str = CANCELLED) -> ToolResult:
    """A call sent to a worker that did not answer before the deadline (or
    the grace after a cancel, whose `cause` the message names)."""
    if cancelled and read:
        text = f"cancelled: {cause} while this read ran; it was abandoned"
        return results.failure(call.id, call.name, Status.cancelled, text)
    if cancelled:
        text = (f"{cause} while this call ran; the tool may or may not "
                "have finished, check its effect before calling it again")  # fmt: skip
        return results.failure(call.id, call.name, Status.outcome_unknown, text)
    if read:
        text = "no result before the batch deadline; the read was abandoned"
        return results.failure(call.id, call.name, Status.timeout, text)
    text = ("no result before the batch deadline; the tool may or may not have run, "
            "check its effect before calling it again")  # fmt: skip
    return results.failure(call.id, call.name, Status.outcome_unknown, text)


def not_run(
    call: ToolCall, failed: ToolCall | None, *, cancelled: bool, cause: str = CANCELLED
) -> tuple[ToolResult, EventKind]:
    """A call that never started: an ordered step (`failed`) failed before it,
    the batch was cancelled (for `cause`), or its deadline passed before the
    call's turn."""
    if failed is None and cancelled:
        text = f"cancelled: {cause} before this call started; it did not run"
        return results.failure(call.id, call.name, Status.cancelled, text), EventKind.cancelled
    if failed is None:
        text = "skipped: the batch's deadline passed before this call's turn; it did not run"
    else:
        text = (f"skipped: call {failed.id} ({failed.name}) failed before it, so later "
                "side effects of this batch were not run")  # fmt: skip
    return results.failure(call.id, call.name, Status.skipped, text), EventKind.skipped
