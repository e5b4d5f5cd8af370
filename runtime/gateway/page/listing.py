"""What the approvals page shows of each call waiting for an answer
(docs/architecture.md, "The approvals page"): the calls the viewer's key may
see (`access.approvals`, as `GET /v1/approvals`), each with its tool, its
arguments as the ledger holds them (redacted), the change a built-in write
would make (from those arguments, as a notification or a transcript shows
it), and the rule and reason that asked (the call's decision row)."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

from runtime.gateway import access
from runtime.gateway.keys import Key, Role
from runtime.ledger.tables import EventKind
from runtime.redaction import redact
from runtime.transcript import changes

KEPT = 4096  # batches whose rules and workspace are remembered, per ledger

# A batch's workspace and the rules that asked never change once its calls
# wait, so they are read once per batch, not at each look of each open page.
_facts: weakref.WeakKeyDictionary[Any, OrderedDict] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def waiting(gateway: Any) -> list:
    """Every call waiting now (one read): what a look compares first."""
    return gateway.runtime.pending_approvals()


def pending(gateway: Any, key: Key, rows: list | None = None) -> dict[str, Any]:
    """The page's list for `key` (blocking: call it off the event loop) from
    `rows` (`waiting`'s; read if not given), redacted as everything the
    gateway answers is (its settings' patterns)."""
    redactor = gateway.runtime.ledger.redactor
    rows = access.approvals(gateway, key, waiting(gateway) if rows is None else rows)
    calls: dict[str, set[str]] = {}
    for row in rows:
        calls.setdefault(row.batch_id, set()).add(row.call_id)
    facts = {batch_id: _batch_facts(gateway, batch_id, ids) for batch_id, ids in calls.items()}
    return redactor.redact(
        {
            "viewer": key.name,
            "can_answer": key.role in (Role.approver, Role.admin),
            "may_widen": key.role is Role.admin,
            "calls": [_shown(row, *facts[row.batch_id]) for row in rows],
        }
    )


def _batch_facts(
    gateway: Any, batch_id: str, calls: set[str]
) -> tuple[dict[str, str | None], str | None]:
    """The batch's rules that asked, by call, and its workspace; read again
    if one of `calls` had no decision row when they were last read."""
    ledger = gateway.runtime.ledger
    with _lock:
        kept = _facts.setdefault(ledger, OrderedDict())
        if batch_id in kept and calls <= kept[batch_id][0].keys():
            kept.move_to_end(batch_id)
            return kept[batch_id]
    found = ledger.batch(batch_id)
    facts = (_rules(gateway, batch_id), found.workspace if found else None)
    if found is not None:
        with _lock:
            kept[batch_id] = facts
            while len(kept) > KEPT:
                kept.popitem(last=False)
    return facts


def _shown(row: Any, rules: dict[str, str | None], workspace: str | None) -> dict[str, Any]:
    """One call as the page shows it (a call with no decision row yet shows no rule)."""
    arguments = redact(row.arguments)  # stored redacted; the shapes of now, too
    change = changes.lines({"tool": row.tool, "arguments": arguments})
    return {
        "batch_id": row.batch_id,
        "call_id": row.call_id,
        "tool": row.tool,
        "arguments": arguments,
        "reason": row.reason,
        "rule": rules.get(row.call_id),
        "workspace": workspace,
        "diff": None if change is None else {"path": change[0], "lines": [t for _, t in change[1]]},
        "requested_at": row.requested_at.isoformat(),
        "expires_at": row.expires_at.isoformat(),
    }


def _rules(gateway: Any, batch_id: str) -> dict[str, str | None]:
    """Each call's rule that asked, from its last decision row (None: the mode
    and the risk asked, no rule)."""
    found: dict[str, str | None] = {}
    for event in gateway.runtime.ledger.events(batch_id):
        if event.kind == EventKind.decision and event.call_id is not None:
            found[event.call_id] = event.rule or None
    return found
