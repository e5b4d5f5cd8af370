"""A call's budgets at its start and its end (docs/architecture.md, "Usage
and budgets", "Where each limit is checked"): held at the batch's start, as
`BatchRun.start` admits its calls, and again right before its tool runs
(`hold`); charged for what it spent once it has (`charge`). The counting is
flow control's (`runtime/flow/budgets.py`, `budget_counters.py`).

The counters live in the batch state (Redis on a cluster) and are checked and
added to in one step there. With the state away a budget is not enforced (the
call is let through and a warning logged): nothing can be sent or published
then either, and a budget is a brake on cost, not a permission."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from runtime.errors import StateUnavailable
from runtime.flow.budgets import Budget, Spending
from runtime.gate.admission import Admitted, Refused
from runtime.gate.decision import Decision
from runtime.ledger.tables import EventKind
from runtime.results import endings
from runtime.transport.base import Budgets
from runtime.types import ToolResult

log = logging.getLogger("toolrun.budgets")


def hold(
    admissions: list[Admitted | Refused],
    spending: Spending,
    state: Budgets | None,
    batch_id: str,
    *,
    to_run: bool = False,
) -> list[Admitted | Refused]:
    """Each admitted call as it was, or a `Refused` ending it `over_budget`
    if it would pass a budget; refusals stay as they are. At admission each
    call's count and per-call price are added now, in the batch's order, in
    one round trip to the state."""
    if state is None or not spending.budgets:
        return admissions
    now = datetime.now(UTC)
    held = [
        (i, *spending.counters(a.spec.name, batch_id, now, to_run=to_run))
        for i, a in enumerate(admissions)
        if isinstance(a, Admitted)
    ]
    try:
        answers = state.spend([counters for _, _, counters in held])
    except StateUnavailable as error:
        log.warning("budgets of batch %s not checked: %s", batch_id, error)
        return admissions
    out = list(admissions)
    for (i, budgets, _), passed in zip(held, answers, strict=True):
        if passed is not None:
            out[i] = _refused(out[i], spending, budgets[passed[0]], passed[1], now)
    return out


def _refused(
    admitted: Admitted, spending: Spending, budget: Budget, used: float, now: datetime
) -> Refused:
    overrun = spending.overrun(budget, used, now)
    message = overrun.message(now)
    result = endings.over_budget(
        admitted.call.id, admitted.spec.name, message, overrun.content(now)
    )
    decision = Decision.deny(message, rule=f"budget:{budget.name}", source=budget.source)
    return Refused(admitted.call, admitted.spec, result, EventKind.decision, decision)


def charge(result: ToolResult, spending: Spending, state: Budgets | None, batch_id: str) -> None:
    """Add the worker-seconds (and their money) of a call that ran."""
    if state is None or not spending.budgets or result.usage is None:
        return
    now = datetime.now(UTC)
    counters = spending.charges(result.tool, batch_id, now, result.usage.worker_seconds)
    try:
        state.charge(counters)
    except StateUnavailable as error:
        log.warning("spending of %s not counted: %s", result.call_id, error)
