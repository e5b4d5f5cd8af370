"""One call of a transcript, from its rows: the decision, the approval, each
attempt and the result (docs/architecture.md, "Transcripts")."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime
from typing import Any

from runtime.ledger.tables import ApprovalRow, CallRow, EventKind, EventRow
from runtime.types import ToolResult

MARKER = re.compile(r"\[REDACTED:([A-Za-z0-9_.-]+)\]")
CUT_MARKERS = ("[content cut:", "[message cut at", " characters cut]", " left out: results carry")
# Events that end an attempt with the call's status.
ENDING = {
    EventKind.finished,
    EventKind.skipped,
    EventKind.cancelled,
    EventKind.lookup_failed,
    EventKind.invalid_arguments,
    EventKind.disabled,
}


def when(value: datetime | None) -> str | None:
    """A time as the transcript writes it: ISO 8601 in UTC, with a Z."""
    return value.isoformat().replace("+00:00", "Z") if value else None


def millis(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds() * 1000, 3)


def redactions(*values: Any) -> dict[str, int]:
    """How many markers of each kind the values carry; a marker repeated in
    the message and the content counts once for each place it was cut from."""
    found: Counter[str] = Counter()
    for value in values:
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        counts = Counter(MARKER.findall(text))
        for kind, count in counts.items():
            found[kind] = max(found[kind], count)
    return dict(sorted(found.items()))


def call(
    row: CallRow,
    events: list[EventRow],
    approval: ApprovalRow | None,
    result: ToolResult | None,
) -> dict[str, Any]:
    return {
        "id": row.call_id,
        "position": row.position,
        "tool": row.tool,
        "kind": row.kind or "function",
        "risk": row.risk,
        "arguments": row.arguments,
        "arguments_redactions": redactions(row.arguments),
        "decision": decision(events),
        "approval": _approval(approval, events),
        "attempts": attempts(events),
        "result": _result(result, row),
        **_hooks(events),
    }


def _hooks(events: list[EventRow]) -> dict[str, Any]:
    """What the policy's hooks answered about the call, when any was asked
    (docs/architecture.md, "Policy hooks")."""
    found = [
        {**(e.detail if isinstance(e.detail, dict) else {}), "at": when(e.at)}
        for e in events
        if e.kind == EventKind.hook
    ]
    return {"hooks": found} if found else {}


def decision(events: list[EventRow]) -> dict[str, Any] | None:
    """The gate's decision: the decision event of an admitted call, or the
    refusal that ended it (it carries the decision's columns)."""
    for event in events:
        if event.effect is not None:
            return {
                "effect": event.effect,
                "reason": event.reason,
                "rule": event.rule,
                "source": event.source,
                "mode": event.mode,
                "policy_version": event.policy_version,
                "at": when(event.at),
            }
    return None


def _approval(row: ApprovalRow | None, events: list[EventRow]) -> dict[str, Any] | None:
    if row is None:
        return None
    answered = next(
        (e for e in events if e.kind in (EventKind.approval_given, EventKind.approval_refused)),
        None,
    )
    return {
        "status": row.status,
        "reason": row.reason,
        "requested_at": when(row.requested_at),
        "expires_at": when(row.expires_at),
        "answered_by": row.answered_by or (answered.approver if answered else None),
        "answered_at": when(row.answered_at),
        "answer": row.answer,
        "arguments_changed": bool(row.updated_arguments),
        "waited_ms": millis(row.requested_at, row.answered_at),
        # The arguments the call ran with, where the approver changed them (the
        # document is redacted as a whole); left out otherwise, so that an
        # older batch's transcript stays as it was.
        **({"arguments": row.arguments_given} if row.updated_arguments else {}),
    }


def ran_with(call: dict[str, Any]) -> Any:
    """The arguments the call was admitted with at last: the approver's, where
    they changed them, else the model's."""
    approval = call.get("approval") or {}
    return approval["arguments"] if "arguments" in approval else call["arguments"]


def elapsed_ms(call: dict[str, Any]) -> float | None:
    """The call's time as its table row shows it: the sum of its attempts'
    times, as the attempts and the totals count them; a call that never
    started shows its result's own figure."""
    times = [attempt["wall_ms"] for attempt in call["attempts"]]
    if times and None not in times:
        return round(sum(times), 3)
    result = call["result"]
    return result and result["duration_ms"] if not times else None


def attempts(events: list[EventRow]) -> list[dict[str, Any]]:
    """Each attempt: a start, then a retry or the end that closed it. The end's
    detail holds the figures its worker measured: the queue wait belongs to
    the delivery's first try (a retry is not queued), the CPU time to the try
    that ended the call."""
    found: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    delivered: dict[str, Any] | None = None  # the attempt the delivery's start opened

    def close(at: datetime, ended: str, reason: str | None = None) -> None:
        current["ended_at"] = when(at)
        current["wall_ms"] = millis(current.pop("_start"), at)
        current["ended"] = ended
        current["reason"] = reason

    for event in events:
        kind = EventKind(event.kind)
        if kind is EventKind.started:
            if current is not None and current.get("ended") is None:
                close(event.at, "lost")  # delivered again: the earlier one never ended
            current = delivered = _attempt(event.attempt or len(found) + 1, event.worker, event.at)
            found.append(current)
        elif kind is EventKind.retried and current is not None:
            close(event.at, "retried", event.reason)
            current = _attempt((current["attempt"] or 0) + 1, event.worker, event.at)
            found.append(current)
        elif kind in ENDING and current is not None and current.get("ended") is None:
            close(event.at, event.status or kind.value, event.reason)
            detail = event.detail if isinstance(event.detail, dict) else {}
            delivered["queue_wait_ms"] = detail.get("queue_wait_ms")
            current["cpu_ms"] = detail.get("cpu_ms")
    for attempt in found:  # still running, or its end was never written
        if attempt.get("ended") is None:
            attempt.pop("_start", None)
            attempt |= {"ended_at": None, "wall_ms": None, "ended": None, "reason": None}
    return found


def costs(attempt: dict[str, Any]) -> str:
    """An attempt's queue wait and CPU time as text ("queued 3 ms, 41 ms CPU"),
    those it has; empty when it has neither (an older document has no keys)."""
    queued, cpu = attempt.get("queue_wait_ms"), attempt.get("cpu_ms")
    return ", ".join(
        [
            *([f"queued {queued:.0f} ms"] if queued is not None else []),
            *([f"{cpu:.0f} ms CPU"] if cpu is not None else []),
        ]
    )


def spent(totals: dict[str, Any]) -> list[str]:
    """The batch's usage as one line ("usage: 1.20 worker-s, 0.31 s CPU, cost
    0.012, tokens 1200 in / 80 out"), or none when it has none."""
    usage = totals.get("usage")
    if not usage:
        return []
    parts = [f"{usage['worker_seconds']:.2f} worker-s", f"{usage['cpu_seconds']:.2f} s CPU"]
    if usage.get("cost") is not None:
        parts.append(f"cost {usage['cost']:g}")
    if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None:
        given, taken = usage.get("input_tokens") or 0, usage.get("output_tokens") or 0
        tokens = f"tokens {given} in / {taken} out"
        parts.append(tokens + (f" ({usage['model']})" if usage.get("model") else ""))
    return ["usage: " + ", ".join(parts)]


def _attempt(number: int, worker: str | None, at: datetime) -> dict[str, Any]:
    return {
        "attempt": number,
        "worker": worker,
        "started_at": when(at),
        "_start": at,
        "queue_wait_ms": None,
        "cpu_ms": None,
    }


def _result(result: ToolResult | None, row: CallRow) -> dict[str, Any] | None:
    if result is None:
        return None
    message = result.model_message
    usage = {"usage": result.usage.model_dump(mode="json")} if result.usage else {}
    return {
        **usage,
        "status": result.status.value,
        "summary": result.summary,
        "model_message": message,
        "error": result.error.model_dump() if result.error else None,
        "duration_ms": result.duration_ms,
        "worker": result.worker,
        "attempts": result.attempts,
        "ended_at": when(row.finished_at),
        "cut": any(marker in message for marker in CUT_MARKERS)
        or (isinstance(result.content, dict) and result.content.get("truncated") is True),
        "redactions": redactions(message, result.content, result.error and result.error.message),
        "media": [
            {"kind": m.kind, "mime_type": m.mime_type, "name": m.name, "bytes": m.size}
            for m in result.media
        ],
    }
