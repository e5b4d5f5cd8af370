"""What a built-in write asked to change, as diff lines: an edit's old and new
text, a written file's content. Made from the redacted arguments: the file as
it was before is not in the ledger."""

from __future__ import annotations

from typing import Any

SHOWN = 200  # lines of a written file shown; the JSON transcript has all


def lines(call: dict[str, Any]) -> tuple[str, list[tuple[str, str]]] | None:
    """(path, [(kind, line)]) with kind `add` or `del`; None for other calls."""
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
