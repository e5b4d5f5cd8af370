"""A call that waits for approval, on the terminal of `toolrun run` and
`toolrun watch` (docs/architecture.md, "Approval notifications"): with a
person at a terminal (stdin and stdout both TTYs) it asks them, and answers;
otherwise it prints one line saying what waits and the exact commands that
answer it, as soon as the call starts to wait."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.prompt import Prompt

from runtime.results import display
from runtime.types import ApprovalRequested

CHOICES = {
    "y": "yes",
    "n": "no",
    "e": "edit the arguments, then run",
    "a": "always: yes, and allow calls like it in this workspace",
}


def interactive(console: Console) -> bool:
    """Whether someone can be asked: output to a terminal, input from one."""
    return console.is_terminal and sys.stdin.isatty()


def waiting_line(batch_id: str, event: ApprovalRequested) -> str:
    from runtime.batch.notification import commands

    approve, deny = commands(batch_id, event.call_id)
    return (
        f"{event.call_id}  {'awaiting approval':<17} {event.tool}: {event.reason}; "
        f"answer with: {approve}  or: {deny}"
    )


def say(batch_id: str, event: ApprovalRequested) -> None:
    """The waiting line on stderr, for a run whose stdout is JSON."""
    display.console(stderr=True).print(waiting_line(batch_id, event), markup=False)


def ask(handle: Any, event: ApprovalRequested, console: Console) -> None:
    """Ask whether the waiting call runs, and answer it through `handle`
    (as the user the shell names). An answer given elsewhere first wins."""
    from runtime.redaction import redact

    arguments = next((c.arguments for c in handle.batch.calls if c.id == event.call_id), None)
    console.print(
        f"\n{event.call_id} {event.tool} waits for approval (batch {handle.batch_id}): "
        f"{event.reason}\n"
        f"  arguments: {json.dumps(redact(arguments), default=str)}",
        markup=False,
    )
    menu = ", ".join(f"{key} = {said}" for key, said in CHOICES.items())
    choice = Prompt.ask(f"run it? ({menu})", choices=list(CHOICES), console=console)
    by = os.environ.get("USER", "cli")
    if choice == "n":
        reason = Prompt.ask("why (the model reads it)", default="denied at the terminal")
        answered, said = handle.deny(event.call_id, reason, by=by), "denied"
    elif choice == "a":
        answered, said = _remembered(handle, event, by, console), "approved"
    else:
        updated = _edited(arguments, console) if choice == "e" else None
        answered = handle.approve(event.call_id, by=by, updated_arguments=updated)
        said = "approved"
    if answered:
        console.print(f"{said} {event.call_id}", markup=False)
    else:
        console.print(f"{event.call_id} is no longer waiting (answered or expired)", markup=False)


def _remembered(handle: Any, event: ApprovalRequested, by: str, console: Console) -> bool:
    """Approve, and remember the call's narrowest rule for the batch's
    workspace ("Remembered rules"); the terminal's user holds the stack's key,
    but a wider rule is `toolrun approve --remember --rule`'s to give."""
    from runtime.client.remembering import approve_and_remember
    from runtime.gate.remembering import RememberRefused

    try:
        row = approve_and_remember(
            handle.services,
            handle.batch_id,
            event.call_id,
            scope="workspace",
            by=by,
            may_widen=False,
        )
    except RememberRefused as error:
        console.print(f"cannot remember a rule ({error}); approving this call only", markup=False)
        return handle.approve(event.call_id, by=by)
    if row is not None:
        console.print(
            f"remembered rule {row.id}: allow {row.rule} for this workspace", markup=False
        )
    return row is not None


def _edited(arguments: Any, console: Console) -> Any:
    """New arguments as JSON, asked until they parse; the gate checks them again."""
    while True:
        text = Prompt.ask("arguments (JSON)", default=json.dumps(arguments), console=console)
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            console.print(f"not JSON: {error.msg}; try again", markup=False)
