"""A transcript as one self-contained HTML page: no script, no external asset,
read at a glance. Calls are rows with their status, decision and approval in
view; arguments, attempts and the model's message open under each row."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from runtime.transcript import changes
from runtime.transcript.calls import costs, elapsed_ms, spent

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1d2330}
h1{font-size:1.3rem}h2{font-size:1.05rem;margin-top:1.6rem}
table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #dde1e8;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f5f8}
.facts td:first-child{color:#5b6474;width:12rem}code,pre{font:12px/1.4 ui-monospace,monospace}
pre{background:#f6f8fa;padding:.6rem;overflow:auto;max-height:24rem;white-space:pre-wrap}
.s{display:inline-block;padding:0 .45rem;border-radius:.6rem;font-weight:600;font-size:12px}
.ok,.allow,.approved{background:#dcf5e3;color:#14632d}.error,.timeout,.outcome_unknown,
.unknown_tool,.invalid_arguments{background:#fde2e1;color:#8c1d18}.denied,.deny,.disabled{background:#fbe3f1;
color:#7a1650}.ask,.pending,.expired,.open{background:#fff3cd;color:#6b4e00}.skipped,.cancelled{background:#e9ecf1;
color:#3d4452}.ended{background:#e3ecfb;color:#1f3f7a}
details{margin:.2rem 0}summary{cursor:pointer;color:#3056a8}.muted{color:#6b7383}
.diff pre{max-height:16rem}.add{color:#14632d;background:#e6f6ea}
.del{color:#8c1d18;background:#fdecea}.asked{color:#6b7383}
"""


def render(document: dict[str, Any]) -> str:
    batch = document["batch"]
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Transcript of batch {escape(batch['id'])}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Transcript of batch <code>{escape(batch['id'])}</code> {_badge(batch['state'])}</h1>",
        _facts(document),
        "<h2>Plan</h2>",
        _plan(document["plan"]["stages"]),
        f"<h2>Calls ({len(document['calls'])})</h2>",
        _calls(document["calls"]),
    ]
    if document.get("reply"):
        reply = document["reply"]
        parts += [
            f"<h2>Reply sent to the model ({escape(reply['format'])})</h2>",
            f"<pre>{_json(reply['body'])}</pre>",
        ]
    parts += ["<h2>Totals</h2>", _totals(document["totals"])]
    seal = document.get("integrity")
    if seal:
        parts.append(
            f'<p class="muted">{escape(document["schema"])} · digest <code>{escape(seal["digest"])}'
            f"</code> · HMAC <code>{escape(seal['hmac'])}</code></p>"
        )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _badge(value: Any) -> str:
    text = "—" if value is None else str(value)
    return f'<span class="s {escape(text)}">{escape(text)}</span>'


def _json(value: Any) -> str:
    return escape(
        value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    )


def _text(value: Any) -> str:
    return '<span class="muted">—</span>' if value in (None, "") else escape(str(value))


def _facts(document: dict[str, Any]) -> str:
    batch = document["batch"]
    policy = batch["policy"]
    rows = [
        ("submitted by", _text(batch["submitter"])),
        ("key", _text(batch["key"])),
        ("mode", _text(batch["mode"])),
        ("workspace", f"<code>{_text(batch['workspace'])}</code>"),
        ("on error", _text(batch["on_error"])),
        ("provider format", _text(batch["format"])),
        ("created", _text(batch["created_at"])),
        ("deadline", _text(batch["deadline_at"])),
        ("ended", _text(batch["ended_at"])),
        (
            "policy",
            f"<code>{_text(policy['version'])}</code> from "
            + (", ".join(f"<code>{escape(f)}</code>" for f in policy["files"]) or "no file"),
        ),
    ]
    if batch["cancelled_at"]:
        rows.append(
            ("cancelled", f"{_text(batch['cancelled_at'])} by {_text(batch['cancelled_by'])}")
        )
    conversation = document.get("conversation")
    if conversation:
        link = conversation["previous"]
        after = "its first turn"
        if link:
            after = (
                f"after batch <code>{escape(link['batch_id'])}</code> "
                f"(<code>{_text(link['digest'] or 'open then')}</code>)"
            )
        rows.append(("conversation", f"<code>{escape(conversation['id'])}</code>, {after}"))
    body = "".join(f"<tr><td>{name}</td><td>{value}</td></tr>" for name, value in rows)
    return f'<table class="facts">{body}</table>'


def _plan(stages: list[dict[str, Any]]) -> str:
    if not stages:
        return '<p class="muted">No stage was recorded.</p>'
    items = "".join(
        f"<li>{'side by side: ' if s['parallel'] else ''}"
        + ", ".join(f"<code>{escape(c)}</code>" for c in s["calls"])
        + "</li>"
        for s in stages
    )
    return f"<ol>{items}</ol>"


def _calls(calls: list[dict[str, Any]]) -> str:
    head = (
        "<tr><th>#</th><th>call</th><th>tool</th><th>risk</th><th>status</th>"
        "<th>decision</th><th>approval</th><th>attempts</th><th>ms</th></tr>"
    )
    rows = "".join(_row(call) for call in calls)
    return f'<table class="calls"><thead>{head}</thead><tbody>{rows}</tbody></table>'


def _row(call: dict[str, Any]) -> str:
    decision, approval, result = call["decision"], call["approval"], call["result"]
    said = (
        f"{_badge(decision['effect'])} <code>{escape(str(decision['rule']))}</code>"
        f'<div class="muted">{_text(decision["source"])} · {_text(decision["reason"])}</div>'
        if decision
        else '<span class="muted">none: ended before the gate</span>'
        if result
        else _text(None)
    )
    asked = _text(None)
    if approval:
        waited = approval["waited_ms"]
        asked = (
            f"{_badge(approval['status'])} {_text(approval['answered_by'])}"
            + (
                f'<div class="muted">after {waited / 1000:.1f} s</div>'
                if waited is not None
                else ""
            )
            + (
                '<div class="muted">arguments changed</div>'
                if approval["arguments_changed"]
                else ""
            )
        )
    status = result["status"] if result else "open"
    cells = [
        str(call["position"] + 1),
        f"<code>{escape(call['id'])}</code>",
        escape(call["tool"]),
        _text(call["risk"]),
        _badge(status),
        said,
        asked,
        str(len(call["attempts"])),
        _text(elapsed_ms(call)),
    ]
    main = (
        f'<tr class="call" id="call-{escape(call["id"])}">'
        + "".join(f"<td>{c}</td>" for c in cells)
        + "</tr>"
    )
    return main + f'<tr class="more"><td></td><td colspan="8">{_details(call)}</td></tr>'


def _details(call: dict[str, Any]) -> str:
    result = call["result"]
    out = [f"<details><summary>arguments</summary><pre>{_json(call['arguments'])}</pre></details>"]
    if "arguments" in (call["approval"] or {}):
        given = _json(call["approval"]["arguments"])
        out.append(
            f"<details open><summary>arguments as approved</summary><pre>{given}</pre></details>"
        )
    change = _change(call)
    if change:
        out.append(change)
    if call["attempts"]:
        lines = "".join(
            f"<li>attempt {a['attempt']} on {_text(a['worker'])} at {_text(a['started_at'])}: "
            f"{_text(a['ended'] or 'running')}"
            + (f" after {a['wall_ms']:.0f} ms" if a["wall_ms"] is not None else "")
            + (f" ({escape(spent)})" if (spent := costs(a)) else "")
            + (f" ({escape(a['reason'])})" if a["reason"] else "")
            + "</li>"
            for a in call["attempts"]
        )
        out.append(f"<details><summary>attempts</summary><ul>{lines}</ul></details>")
    if result:
        notes = []
        if result["cut"]:
            notes.append("cut to its bound")
        if result["redactions"]:
            notes.append(
                "redacted: "
                + ", ".join(f"{escape(k)} ×{n}" for k, n in result["redactions"].items())
            )
        out.append(
            f"<div>{escape(result['summary'])}"
            + (f' <span class="muted">({"; ".join(notes)})</span>' if notes else "")
            + "</div>"
            "<details><summary>message to the model</summary>"
            f"<pre>{_json(result['model_message'])}</pre></details>"
        )
    return "".join(out)


def _change(call: dict[str, Any]) -> str | None:
    change = changes.of(call)
    if change is None:
        return None
    shown = "".join(f'<span class="{k}">{escape(text)}</span>\n' for k, text in change.lines)
    note = f' <span class="muted">asked for, {escape(change.note)}</span>' if change.note else ""
    return f'<div class="diff"><code>{_text(change.path)}</code>{note}<pre>{shown}</pre></div>'


def _totals(totals: dict[str, Any]) -> str:
    by_status = ", ".join(f"{n} {_badge(s)}" for s, n in totals["by_status"].items()) or "none yet"
    redacted = ", ".join(f"{escape(k)} ×{n}" for k, n in totals["redactions"].items()) or "nothing"
    elapsed = totals["elapsed_ms"]
    items = [
        f"{totals['calls']} call(s), {totals['ended']} ended: {by_status}",
        f"{totals['attempts']} attempt(s), {totals['retries']} retried; "
        f"{totals['wall_ms']:.0f} ms of tool time",
        f"{totals['approvals']} approval(s) asked, {totals['approvals_given']} given",
        f"redacted: {redacted}",
        f"elapsed: {'—' if elapsed is None else f'{elapsed / 1000:.2f} s'}",
        *(escape(line) for line in spent(totals)),
    ]
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
