"""What the approvals page shows of each call waiting for an answer
(docs/architecture.md, "The approvals page"): the calls the viewer's key may
see (`access.approvals`, as `GET /v1/approvals`), each with its tool, its
arguments as the ledger holds them (redacted), the change a built-in write
would make (from those arguments, as a notification or a transcript shows
it), and the rule and reason that asked (the call's decision row)."""

from __future__ import annotations

from typing import Any

from runtime.gateway import access
from runtime.gateway.keys import Key, Role
from runtime.ledger.tables import EventKind
from runtime.redaction import redact
from runtime.transcript import changes


def pending(gateway: Any, key: Key) -> dict[str, Any]:
    """The page's list for `key` (blocking: call it off the event loop),
    redacted as everything the gateway answers is (its settings' patterns)."""
    redactor = gateway.runtime.ledger.redactor
    rows = access.approvals(gateway, key, gateway.runtime.pending_approvals())
    asked: dict[str, dict[str, str | None]] = {}
    places: dict[str, str | None] = {}
    for batch_id in {row.batch_id for row in rows}:
        asked[batch_id] = _rules(gateway, batch_id)
        found = gateway.runtime.ledger.batch(batch_id)
        places[batch_id] = found.workspace if found else None
    return redactor.redact(
        {
            "viewer": key.name,
            "can_answer": key.role in (Role.approver, Role.admin),
            "may_widen": key.role is Role.admin,
            "calls": [_shown(row, asked[row.batch_id], places[row.batch_id]) for row in rows],
        }
    )


def _shown(row: Any, rules: dict[str, str | None], workspace: str | None) -> dict[str, Any]:
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
