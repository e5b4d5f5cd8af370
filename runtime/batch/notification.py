"""What a person is told when a call starts to wait for approval
(docs/architecture.md, "Approval notifications"): the tool, its arguments
redacted, the change a write would make (from those arguments alone, as the
transcript shows it), the rule or reason that asked, and the commands and
links that answer it. Two forms: toolrun's own JSON, and Slack's `text` and
`blocks` for an incoming webhook."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Any
from urllib.parse import quote

from runtime.batch.plan import BatchPlan
from runtime.gate.notifiers import Notifier
from runtime.transcript import changes

EVENT = "approval.requested"
SHOWN = 2800  # characters of arguments or diff in one Slack block (a section holds 3,000)


def body(
    plan: BatchPlan, call_id: str, arguments: Any, expires_at: datetime, notifier: Notifier
) -> dict[str, Any]:
    """The message for `notifier`; `arguments` are already redacted."""
    message = facts(plan, call_id, arguments, expires_at, notifier.gateway_url)
    return slack(message) if notifier.format == "slack" else message


def facts(
    plan: BatchPlan, call_id: str, arguments: Any, expires_at: datetime, gateway: str | None
) -> dict[str, Any]:
    planned, batch = plan.calls[call_id], plan.batch.id
    change = changes.lines({"tool": planned.tool, "arguments": arguments})
    approve, deny = commands(batch, call_id)
    answer: dict[str, str] = {"approve": approve, "deny": deny}
    if gateway is not None:
        path = f"{gateway}/v1/batches/{quote(batch, safe='')}/calls/{quote(call_id, safe='')}"
        answer |= {"approve_url": f"{path}/approve", "deny_url": f"{path}/deny"}
    return {
        "event": EVENT,
        "batch_id": batch,
        "call_id": call_id,
        "tool": planned.tool,
        "arguments": arguments,
        "reason": planned.reason,
        "rule": planned.rule or None,
        "mode": plan.batch.mode.value,
        "workspace": plan.batch.workspace,
        "expires_at": expires_at.isoformat(),
        "diff": None if change is None else {"path": change[0], "lines": [t for _, t in change[1]]},
        "answer": answer,
    }


def commands(batch_id: str, call_id: str) -> tuple[str, str]:
    """The commands that approve and deny `call_id`, quoted for a shell: a call
    id is the model's text, and people paste these."""
    where = f"{shlex.quote(call_id)} --batch {shlex.quote(batch_id)}"
    return f"toolrun approve {where}", f"toolrun deny {where} --reason 'why, for the model'"


def slack(message: dict[str, Any]) -> dict[str, Any]:
    """Slack's incoming-webhook form: a `text` fallback and `blocks` (mrkdwn)."""
    tool, call, batch = message["tool"], message["call_id"], message["batch_id"]
    text = f"toolrun: {tool} call {call} of batch {batch} waits for approval: {message['reason']}"
    arguments = json.dumps(message["arguments"], indent=2, default=str)
    blocks: list[dict[str, Any]] = [
        _section(
            f"*{_escape(tool)}* waits for approval (batch `{_escape(batch)}`, "
            f"call `{_escape(call)}`, mode {message['mode']})\n"
            f"*Why:* {_escape(message['reason'])}"
        ),
        _section(f"*Arguments*\n```{_escape(_cut(arguments))}```"),
    ]
    if message["diff"] is not None:
        path, diff = message["diff"]["path"], "\n".join(message["diff"]["lines"])
        blocks.append(_section(f"*Change to* `{_escape(path)}`\n```{_escape(_cut(diff))}```"))
    answer = message["answer"]
    how = f"*Answer:* `{_escape(answer['approve'])}` or `{_escape(answer['deny'])}`"
    if "approve_url" in answer:
        how += f"\nor POST <{answer['approve_url']}|approve> / <{answer['deny_url']}|deny>"
    blocks.append(_section(how))
    expiry = {"type": "mrkdwn", "text": f"expires {message['expires_at']}"}
    blocks.append({"type": "context", "elements": [expiry]})
    return {"text": text, "blocks": blocks}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + "\n… (cut)"


def _escape(text: str) -> str:
    """Slack's three control characters in mrkdwn."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
