"""What a built-in write changed, as diff lines: an edit's old and new text, a
written file's content. Made from the redacted arguments the call ran with
(the approver's, where they changed them); the file as it was before is not in
the ledger. A change the tool never made (the call was refused, denied or
never started) is shown as asked for, not as a diff, and so is one whose call
ran but did not end `ok`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.transcript.calls import ran_with

SHOWN = 200  # lines of a written file shown; the JSON transcript has all


@dataclass(frozen=True)
class Change:
    """`lines` are (kind, text), kind `add` or `del` for a change made and
    `asked` for one that was not, which `note` explains (None when made)."""

    path: str
    lines: list[tuple[str, str]]
    note: str | None = None


def lines(call: dict[str, Any]) -> tuple[str, list[tuple[str, str]]] | None:
    """(path, [(kind, line)]) of the change the call's `arguments` ask for, kind
    `add` or `del` (an approval's notice shows it so); None for other calls."""
    arguments = call["arguments"] if isinstance(call["arguments"], dict) else {}
    path = str(arguments.get("path", ""))
    if call["tool"] == "edit_file" and isinstance(arguments.get("old_string"), str):
        found = [("del", f"- {line}") for line in arguments["old_string"].splitlines()]
        new = str(arguments.get("new_string", ""))
        return path, found + [("add", f"+ {line}") for line in new.splitlines()]
    if call["tool"] == "write_file" and isinstance(arguments.get("content"), str):
        content = arguments["content"].splitlines()
        found = [("add", f"+ {line}") for line in content[:SHOWN]]
        if len(content) > SHOWN:
            found.append(("add", f"… {len(content) - SHOWN} more lines"))
        return path, found
    return None


def of(call: dict[str, Any]) -> Change | None:
    """The change a transcript's `write_file` or `edit_file` call made with the
    arguments it ran with, or asked for; None for other calls."""
    asked = lines({"tool": call["tool"], "arguments": ran_with(call)})
    if asked is None:
        return None
    path, found = asked
    result = call["result"]
    status = result["status"] if result else None
    if status == "ok":
        return Change(path, found)
    found = [("asked", text) for _, text in found]
    if status is None:
        why = "the call has not ended"
    elif not call["attempts"]:
        why = f"not made: the call ended {status} before it ran"
    else:
        why = f"not known to be made: the call ended {status}"
    return Change(path, found, why)
