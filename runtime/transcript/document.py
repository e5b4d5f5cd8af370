"""A batch's transcript, from the ledger alone: the batch, its conversation
link, the plan, each call, the reply a provider message got, and totals
(docs/architecture.md, "Transcripts"; the shape is docs/schemas/transcript-1.json).

Once every call has ended the document no longer changes, whoever builds it
and whenever: it holds no time of building, and the batch's end is its last
call's end (the batch row's own `ended_at` is the sweep's bookkeeping, set a
moment later).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from runtime import adapters
from runtime.ledger.store import Ledger
from runtime.ledger.tables import BatchRow, EventRow
from runtime.transcript import calls as parts

SCHEMA = "toolrun.transcript/1"


def build(ledger: Ledger, batch_id: str) -> dict[str, Any] | None:
    """The transcript of `batch_id`, unsealed; None if the ledger has no such batch."""
    record = ledger.record(batch_id)
    if record is None:
        return None
    row, rows, ends = record.batch, record.calls, record.ends
    events: dict[str, list[EventRow]] = {}
    for event in record.events:
        events.setdefault(event.call_id or "", []).append(event)
    found = [
        parts.call(
            c, events.get(c.call_id, []), record.approvals.get(c.call_id), ends.get(c.call_id)
        )
        for c in rows
    ]
    ended = bool(rows) and all(call.call_id in ends for call in rows)
    last = max((c.finished_at for c in rows if c.finished_at), default=None) if ended else None
    document = {
        "schema": SCHEMA,
        "batch": _batch(row, ended, last),
        "conversation": _conversation(row),
        "plan": {"stages": row.stages or []},
        "calls": found,
        "reply": _reply(row, rows, ends) if ended else None,
        "totals": _totals(found, row, last),
    }
    # The rows are redacted already; the columns a submitter gave (key, submitter,
    # workspace) pass the ledger's redactor here, the same wherever it is built.
    return ledger.redactor.redact(document)


def _batch(row: BatchRow, ended: bool, last) -> dict[str, Any]:
    # A cancel that came after every call had ended changed nothing: left out,
    # so that an ended batch's transcript stays as it was.
    cancelled = row.cancelled_at is not None and (last is None or row.cancelled_at <= last)
    return {
        "id": row.id,
        "key": row.key,
        "submitter": row.submitter,
        "mode": row.mode,
        "workspace": row.workspace,
        "on_error": row.on_error,
        "format": row.format,
        "state": "ended" if ended else "open",
        "created_at": parts.when(row.created_at),
        "deadline_at": parts.when(row.deadline_at),
        "ended_at": parts.when(last),
        "cancelled_at": parts.when(row.cancelled_at) if cancelled else None,
        "cancelled_by": row.cancelled_by if cancelled else None,
        "policy": {"version": row.policy_version, "files": row.policy_files or []},
    }


def _conversation(row: BatchRow) -> dict[str, Any] | None:
    if row.conversation is None:
        return None
    previous = None
    if row.previous_batch is not None:
        previous = {"batch_id": row.previous_batch, "digest": row.previous_digest}
    return {"id": row.conversation, "previous": previous}


def _reply(row: BatchRow, rows, ends) -> dict[str, Any] | None:
    """What the model was answered with: a provider message's reply is made
    from the calls' ends alone, so it is made again here, the same."""
    if row.format is None:
        return None
    results = [ends[call.call_id] for call in rows]
    kinds = {call.call_id: call.kind or "function" for call in rows}
    return {"format": row.format, "body": adapters.reply(row.format, results, kinds)}


def _totals(found: list[dict[str, Any]], row: BatchRow, last) -> dict[str, Any]:
    statuses = Counter(c["result"]["status"] for c in found if c["result"])
    redacted: Counter[str] = Counter()
    for call in found:
        redacted.update(call["arguments_redactions"])
        redacted.update((call["result"] or {}).get("redactions", {}))
    attempts = [a for call in found for a in call["attempts"]]
    approvals = [c["approval"] for c in found if c["approval"]]
    return {
        "calls": len(found),
        "ended": sum(statuses.values()),
        "by_status": dict(sorted(statuses.items())),
        "attempts": len(attempts),
        "retries": sum(1 for a in attempts if a["ended"] == "retried"),
        "approvals": len(approvals),
        "approvals_given": sum(1 for a in approvals if a["status"] == "approved"),
        "wall_ms": round(sum(a["wall_ms"] or 0 for a in attempts), 3),
        "elapsed_ms": parts.millis(row.created_at, last),
        "redactions": dict(sorted(redacted.items())),
        **_usage(found, row),
    }


def _usage(found: list[dict[str, Any]], row: BatchRow) -> dict[str, Any]:
    """The batch's usage (docs/architecture.md, "Usage and budgets"); left out
    when nothing was measured, so an older batch's transcript stays as it was."""
    used = [c["result"]["usage"] for c in found if c["result"] and "usage" in c["result"]]
    if not used and row.input_tokens is None and row.output_tokens is None:
        return {}
    costs = [u["cost"] for u in used if u.get("cost") is not None]
    return {
        "usage": {
            "worker_seconds": round(sum(u.get("wall_ms") or 0 for u in used) / 1000, 6),
            "cpu_seconds": round(sum(u.get("cpu_ms") or 0 for u in used) / 1000, 6),
            "cost": round(sum(costs), 9) if costs else None,
            "model": row.model,
            "input_tokens": row.input_tokens,
            "output_tokens": row.output_tokens,
        }
    }
