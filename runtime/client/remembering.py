"""Approve and remember (docs/architecture.md, "Remembered rules"): an answer
that lets a waiting call run and adds an allow rule for calls like it, scoped
to the batch's workspace or its submitter; and the rules a new batch is
submitted under."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.batch.plan import BatchPlan
from runtime.client.handle import answer
from runtime.client.run import Services
from runtime.errors import LedgerUnavailable, StateUnavailable
from runtime.gate.remembering import RememberRefused, rule_for
from runtime.ledger.remembered import SCOPES, RememberedRules
from runtime.ledger.store import Ledger
from runtime.ledger.tables import RememberedRuleRow
from runtime.registry.capabilities import CapabilitySpec, Registry
from runtime.types import Batch, Risk

log = logging.getLogger("toolrun.batch")


def remembered_for(
    ledger: Ledger, registry: Registry, batch: Batch, submitter: str
) -> Callable[[str], list[tuple[str, str]]] | None:
    """What `PolicySources.policy_for` asks for a batch's workspace: the rules
    remembered for it or for `submitter`, as (rule, source). None for a batch
    of reads alone that nobody is asked about, which an allow rule changes
    nothing for (every mode runs them): its submit skips the ledger read."""
    if all(_runs_anyway(registry.get(call.name)) for call in batch.calls):
        return None

    def read(workspace: str) -> list[tuple[str, str]]:
        try:
            rows = RememberedRules(ledger).active(workspace, submitter)
        except LedgerUnavailable as error:  # a submit goes on with the ledger cut
            log.warning("remembered rules not read, none applied to this batch: %s", error)
            return []  # only allows are remembered: without them a call asks, never more
        return [(rule, f"remembered #{rule_id} by {by}") for rule_id, rule, by in rows]

    return read


def approve_and_remember(
    services: Services,
    batch_id: str,
    call_id: str,
    *,
    scope: str,
    by: str,
    rule: str | None = None,
    may_widen: bool,
    updated_arguments: Any = None,
    kept: list | None = None,
) -> RememberedRuleRow | None:
    """Approve the waiting call (as `services`'s runtime answers) and remember
    `rule` (None: the narrowest rule for it) for its batch's `scope`; None if
    the call was no longer waiting (nothing is remembered then). `may_widen`:
    the answerer's role may give a rule wider than the call (an admin).
    `RememberRefused` says why a rule cannot be remembered, before anything is
    answered. `kept` is given the rule once it is stored (also when the answer
    then finds Redis away)."""
    kept = [] if kept is None else kept
    if scope not in SCOPES:
        raise RememberRefused(f"remember for one of {list(SCOPES)}, not {scope!r}")
    ledger = services.approvals.ledger
    waiting = services.approvals.get(batch_id, call_id)
    body = ledger.plan(batch_id)
    if waiting is None or waiting.status != "pending" or body is None:
        return None
    plan = BatchPlan.model_validate(body)
    spec = services.registry.get(waiting.tool)
    if spec is None:
        raise RememberRefused(f"tool {waiting.tool!r} is no longer registered")
    arguments = plan.call(call_id).arguments if updated_arguments is None else updated_arguments
    workspace = Path(plan.batch.workspace).resolve()
    text = rule_for(spec, arguments, workspace, rule, may_widen=may_widen)
    if scope == "workspace":
        value = str(workspace)
    else:
        row = ledger.batch(batch_id)
        if row is None or not row.submitter:
            raise RememberRefused(f"batch {batch_id} names no submitter to remember it for")
        value = row.submitter
    rules = RememberedRules(ledger)

    def add() -> RememberedRuleRow:
        row = rules.add(
            text, scope=scope, scope_value=value, by=by, batch_id=batch_id, call_id=call_id
        )
        kept.append(row)
        return row

    try:
        approved = answer(
            services, batch_id, call_id, approve=True, by=by, updated_arguments=updated_arguments
        )
        if not approved:
            return None
    except (
        StateUnavailable
    ):  # the answer stands; Redis carries the batch on later: so does the rule
        add()
        raise
    return add()


def _runs_anyway(spec: CapabilitySpec | None) -> bool:
    """A call an allow rule cannot change: an unknown tool (refused) or a read
    that does not require approval."""
    return spec is None or (spec.risk is Risk.read and not spec.requires_approval)
