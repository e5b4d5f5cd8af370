"""Post hooks: each result a worker's tool produced, shown to the policy's
post hooks (from the signed snapshot the call's message carries) before it is
recorded and published (docs/architecture.md, "Policy hooks").

A hook's `note` is appended to the result's model message, naming the hook,
for the model to read; its `mark` is appended to the screen summary. Each
answer, latency and failure is an event row of kind `hook`. A post hook
cannot undo what the tool did, so its failure changes nothing in the result,
whatever its `on_failure` says; the row records it. Post hooks run in the pool
process before the call's hard limit kills it, so together they get what is
left of that limit (docs/architecture.md, "Policy hooks").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from runtime.gate.hooks.answer import Answer
from runtime.gate.hooks.calling import Consulted, consult
from runtime.gate.hooks.declaration import Hook
from runtime.ledger.store import Ledger
from runtime.ledger.tables import EventKind
from runtime.redaction import redactor_for
from runtime.registry.capabilities import CapabilitySpec
from runtime.settings import Settings
from runtime.types import CallMessage, ToolResult


def on_worker(
    result: ToolResult,
    message: CallMessage,
    spec: CapabilitySpec,
    settings: Settings,
    ledger: Ledger,
    worker: str | None,
    key: bytes,
    began: float,
) -> ToolResult:
    """The post hooks of the signed policy the message carries, on the result
    of its tool, which started at `began` (`time.monotonic()`); each hook's
    row written by this worker."""
    declared = message.policy.get("hooks")  # read alone: most policies have none
    hooks = tuple(Hook.from_dict(hook) for hook in declared or () if hook["when"] == "post")
    if not hooks:
        return result

    def record(asked: Consulted) -> None:
        fields = asked.fields()
        ledger.eventually(
            lambda: ledger.record_event(
                message.batch_id, message.call_id, EventKind.hook, worker=worker, **fields
            )
        )

    redactor = redactor_for(settings.redaction_patterns)
    # The pool process dies at the hard limit, counted from the tool's start:
    # the post hooks get what is left of it, less a margin to record the end.
    limit = (spec.timeout or settings.default_timeout) + settings.kill_grace
    left = limit - (time.monotonic() - began) - min(1.0, settings.kill_grace / 2)
    return after(result, message, hooks, key=key, redactor=redactor, record=record, seconds=left)


def after(
    result: ToolResult,
    message: CallMessage,
    hooks: tuple[Hook, ...],
    *,
    key: bytes,
    redactor: Any,
    record: Callable[[Consulted], None],
    seconds: float | None = None,
) -> ToolResult:
    """`result` with every post hook's note and mark; `record(consulted)`
    writes each hook's row. `seconds`: what all of them may take together (a
    hook's timeout is cut to what is left; with nothing left it is not asked,
    and its row says so)."""
    deadline = time.monotonic() + seconds if seconds is not None else None
    for hook in hooks:
        if hook.when != "post" or not hook.sees(message.tool):
            continue
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                why = "not asked: no time left before the call's hard limit"
                record(Consulted(hook, Answer(), 0.0, why, non_blocking=True))
                continue
            hook = replace(hook, timeout=min(hook.timeout, left))
        asked = consult(hook, request(result, message, hook, redactor), key, message.tool)
        record(asked)
        answer = asked.answer
        changes: dict[str, Any] = {}
        if answer.note:
            note = f"[note from hook {hook.name!r}: {answer.note}]"
            changes["model_message"] = f"{result.model_message}\n\n{note}"
        if answer.mark:
            changes["summary"] = f"{result.summary} [marked {answer.mark!r} by hook {hook.name!r}]"
        if changes:
            result = result.model_copy(update=changes)
    return result


def request(result: ToolResult, message: CallMessage, hook: Hook, redactor: Any) -> dict[str, Any]:
    """What a post hook is shown: the call, and the result as the worker
    formatted it (already redacted, as everything leaving a worker is)."""
    arguments = message.arguments
    return {
        "event": "post_tool_use",
        "hook": hook.name,
        "batch_id": message.batch_id,
        "call_id": message.call_id,
        "tool": message.tool,
        "arguments": redactor.redact(arguments) if hook.redact else arguments,
        "mode": message.mode.value,
        "workspace": message.workspace,
        "decision": message.decision,
        "result": {
            "status": result.status.value,
            "model_message": result.model_message,
            "summary": result.summary,
            "content": result.content,
            "error": result.error.model_dump(mode="json") if result.error else None,
        },
    }
