"""A transcript as Markdown that reads well in a terminal and in a pull
request: the batch as a table, one row per call, then each call in full."""

from __future__ import annotations

import json
from typing import Any

from runtime.transcript import changes
from runtime.transcript.calls import costs, elapsed_ms, ran_with, spent

FENCE_LIMIT = 4000  # characters of a model message or a reply shown; the JSON has all


def render(document: dict[str, Any]) -> str:
    batch = document["batch"]
    out = [f"# Transcript of batch `{batch['id']}`", "", *_batch(document), ""]
    out += ["## Plan", "", *_plan(document), ""]
    out += ["## Calls", "", *_table(document["calls"]), ""]
    for call in document["calls"]:
        out += _call(call)
    if document.get("reply"):
        reply = document["reply"]
        out += [f"## Reply sent to the model ({reply['format']})", "", *_fence(reply["body"]), ""]
    out += ["## Totals", "", *_totals(document["totals"]), ""]
    seal = document.get("integrity")
    if seal:
        out += [
            "---",
            "",
            f"Schema `{document['schema']}`; digest `{seal['digest']}`; HMAC `{seal['hmac']}`.",
            "",
        ]
    return "\n".join(out)


def _cell(value: Any) -> str:
    text = "—" if value in (None, "") else str(value)
    return " ".join(text.replace("|", "\\|").split())


def _batch(document: dict[str, Any]) -> list[str]:
    batch = document["batch"]
    policy = batch["policy"]
    files = ", ".join(f"`{f}`" for f in policy["files"]) or "no file"
    rows = [
        ("state", batch["state"]),
        ("submitted by", batch["submitter"]),
        ("key", batch["key"] and f"`{batch['key']}`"),
        ("mode", batch["mode"]),
        ("workspace", f"`{batch['workspace']}`"),
        ("on error", batch["on_error"]),
        ("provider format", batch["format"]),
        ("created", batch["created_at"]),
        ("deadline", batch["deadline_at"]),
        ("ended", batch["ended_at"]),
        ("policy", f"`{policy['version']}` from {files}"),
    ]
    if batch["cancelled_at"]:
        rows.append(("cancelled", f"{batch['cancelled_at']} by {batch['cancelled_by']}"))
    conversation = document.get("conversation")
    if conversation:
        link = conversation["previous"]
        after = "its first turn"
        if link:
            after = f"after batch `{link['batch_id']}` (`{link['digest'] or 'open then'}`)"
        rows.append(("conversation", f"`{conversation['id']}`, {after}"))
    return ["| | |", "|---|---|", *(f"| {name} | {_cell(value)} |" for name, value in rows)]


def _plan(document: dict[str, Any]) -> list[str]:
    stages = document["plan"]["stages"]
    if not stages:
        return ["No stage was recorded."]
    lines = []
    for number, stage in enumerate(stages, 1):
        ids = ", ".join(f"`{c}`" for c in stage["calls"])
        lines.append(f"{number}. {'side by side: ' if stage['parallel'] else ''}{ids}")
    return lines


def _table(calls: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| # | call | tool | risk | decision | approval | status | attempts | ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for call in calls:
        decision, approval, result = call["decision"], call["approval"], call["result"]
        said = decision and f"{decision['effect']} `{decision['rule']}`"
        asked = approval and f"{approval['status']} by {approval['answered_by'] or '—'}"
        cells = [
            call["position"] + 1,
            f"`{call['id']}`",
            call["tool"],
            call["risk"],
            said,
            asked,
            result["status"] if result else "open",
            len(call["attempts"]),
            elapsed_ms(call),
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _call(call: dict[str, Any]) -> list[str]:
    result = call["result"]
    status = result["status"] if result else "open"
    out = [f"### {call['position'] + 1}. `{call['tool']}` `{call['id']}`: {status}", ""]
    out += ["Arguments (redacted):", "", *_fence(call["arguments"]), ""]
    change = changes.of(call)
    if change is not None:
        text = "\n".join(t for _, t in change.lines)
        if change.note is None:
            out += [f"Change to `{change.path}`:", "", *_fence(text, "diff"), ""]
        else:  # a plain fence: no renderer colours a change that was not made
            out += [f"Change asked for `{change.path}` ({change.note}):", ""]
            out += [*_fence(text, "text"), ""]
    decision = call["decision"]
    if decision:
        out.append(
            f"- **Decision:** {decision['effect']} by rule `{decision['rule']}` from "
            f"{decision['source']} in {decision['mode']} mode: {decision['reason']}"
        )
    approval = call["approval"]
    if approval:
        waited = approval["waited_ms"]
        out.append(
            f"- **Approval:** {approval['status']}"
            + (
                f" by {approval['answered_by']} at {approval['answered_at']}"
                if approval["answered_by"]
                else ""
            )
            + (f" after {waited / 1000:.1f} s" if waited is not None else "")
            + ("; the arguments were changed" if approval["arguments_changed"] else "")
            + f" (asked: {approval['reason']})"
        )
        if approval["arguments_changed"] and "arguments" in approval:
            out += ["", "Arguments the call ran with, as approved (redacted):", ""]
            out += [*_fence(ran_with(call)), ""]
    out += [_hook(asked) for asked in call.get("hooks", ())]
    for attempt in call["attempts"]:
        wall, spent = attempt["wall_ms"], costs(attempt)
        out.append(
            f"- **Attempt {attempt['attempt']}** on {attempt['worker'] or 'this process'} at "
            f"{attempt['started_at']}: {attempt['ended'] or 'running'}"
            + (f" after {wall:.0f} ms" if wall is not None else "")
            + (f" ({spent})" if spent else "")
            + (f" ({attempt['reason']})" if attempt["reason"] else "")
        )
    if result:
        notes = []
        if result["cut"]:
            notes.append("cut to its bound")
        if result["redactions"]:
            notes.append(
                "redacted: " + ", ".join(f"{k} ×{n}" for k, n in result["redactions"].items())
            )
        if result["media"]:
            notes.append(f"{len(result['media'])} media item(s)")
        out.append(
            f"- **Result:** {result['summary']}" + (f" ({'; '.join(notes)})" if notes else "")
        )
        out += ["", "Message to the model:", "", *_fence(result["model_message"], "text")]
    out.append("")
    return out


def _hook(asked: dict[str, Any]) -> str:
    """One policy hook's line: what it said, how fast, or how it failed."""
    said = [f"{asked['decision']}" if "decision" in asked else "no opinion"]
    said += [f"reason: {asked['reason']}"] if "reason" in asked else []
    said += ["replaced the arguments"] if asked.get("arguments_replaced") else []
    said += [f"note: {asked['note']}"] if "note" in asked else []
    said += [f"mark: {asked['mark']}"] if "mark" in asked else []
    if "failure" in asked:
        said = [f"failed ({asked['failure']}), {asked['on_failure']}"]
    return (
        f"- **Hook** `{asked['hook']}` ({asked['when']}, {asked['kind']}) in "
        f"{asked['latency_ms']:.1f} ms: {'; '.join(said)}"
    )


def _totals(totals: dict[str, Any]) -> list[str]:
    by_status = ", ".join(f"{n} {s}" for s, n in totals["by_status"].items()) or "none yet"
    redacted = ", ".join(f"{k} ×{n}" for k, n in totals["redactions"].items()) or "nothing"
    elapsed = totals["elapsed_ms"]
    return [
        f"- {totals['calls']} call(s), {totals['ended']} ended: {by_status}",
        f"- {totals['attempts']} attempt(s), {totals['retries']} retried; "
        f"{totals['wall_ms']:.0f} ms of tool time",
        f"- {totals['approvals']} approval(s) asked, {totals['approvals_given']} given",
        f"- redacted: {redacted}",
        f"- elapsed: {'—' if elapsed is None else f'{elapsed / 1000:.2f} s'}",
        *(f"- {line}" for line in spent(totals)),
    ]


def _fence(value: Any, language: str = "json") -> list[str]:
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    if len(text) > FENCE_LIMIT:
        text = (
            text[:FENCE_LIMIT]
            + f"\n… {len(text) - FENCE_LIMIT} more characters in the JSON transcript"
        )
    fence = "```"
    while fence in text:
        fence += "`"
    return [f"{fence}{language}", text, fence]
