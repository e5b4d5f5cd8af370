"""A call held to its batch's budgets, at admission and again right before
its tool runs, and charged for what it spent once it has
(docs/architecture.md, "Usage and budgets").

The counters live in the batch state (Redis on a cluster) and are checked and
added to in one step there. With the state away a budget is not enforced (the
call is let through and a warning logged): nothing can be sent or published
then either, and a budget is a brake on cost, not a permission."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from runtime.errors import StateUnavailable
from runtime.gate.admission import Admitted, Refused
from runtime.gate.decision import Decision
from runtime.ledger.tables import EventKind
from runtime.results import endings
from runtime.transport.base import BatchState
from runtime.types import ToolResult
from runtime.usage.budgets import Spending

log = logging.getLogger("toolrun.budgets")


def hold(
    admitted: Admitted,
    spending: Spending,
    state: BatchState | None,
    batch_id: str,
    *,
    to_run: bool = False,
) -> Admitted | Refused:
    """`admitted`, or a `Refused` ending it `over_budget` if it would pass a
    budget. At admission its call and per-call price are counted now."""
    if state is None or not spending.budgets:
        return admitted
    now = datetime.now(UTC)
    budgets, counters = spending.counters(admitted.spec.name, batch_id, now, to_run=to_run)
    try:
        passed = state.spend(counters)
    except StateUnavailable as error:
        log.warning("budgets of %s not checked: %s", admitted.call.id, error)
        return admitted
    if passed is None:
        return admitted
    index, used = passed
    overrun = spending.overrun(budgets[index], used, now)
    message = overrun.message(now)
    result = endings.over_budget(
        admitted.call.id, admitted.spec.name, message, overrun.content(now)
    )
    budget = budgets[index]
    decision = Decision.deny(message, rule=f"budget:{budget.name}", source=budget.source)
    return Refused(admitted.call, admitted.spec, result, EventKind.decision, decision)


def charge(result: ToolResult, spending: Spending, state: BatchState | None, batch_id: str) -> None:
    """Add the worker-seconds (and their money) of a call that ran."""
    if state is None or not spending.budgets or result.usage is None:
        return
    now = datetime.now(UTC)
    counters = spending.charges(result.tool, batch_id, now, result.usage.worker_seconds)
    try:
        state.charge(counters)
    except StateUnavailable as error:
        log.warning("spending of %s not counted: %s", result.call_id, error)
