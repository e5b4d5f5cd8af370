"""What a hook answers, whatever its kind: one JSON object.

A pre hook: `{"decision": "allow" | "deny" | "ask", "reason": "...",
"arguments": {...}}`, every key optional (`{}`: no opinion; `arguments`
replaces the call's arguments, validated again). A post hook: `{"note":
"...", "mark": "..."}` (a note the model reads after the result; a short label
the ledger, the transcript and the screen summary show). Anything else is the
hook failing (`HookFailed`), which its `on_failure` judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.errors import HookFailed
from runtime.gate.decision import Effect

PRE_KEYS = {"decision", "reason", "arguments"}
POST_KEYS = {"note", "mark"}
TEXT_CHARS = 2000  # what a result or a row keeps of a hook's reason or note
MARK_CHARS = 64


@dataclass(frozen=True)
class Answer:
    effect: Effect | None = None  # None: no opinion
    reason: str = ""
    arguments: dict[str, Any] | None = None  # the replacement, if any
    note: str = ""
    mark: str = ""

    def as_dict(self) -> dict[str, Any]:
        """What the ledger's hook row keeps of it (arguments as a flag: the
        replacement itself travels in the call's own rows)."""
        found: dict[str, Any] = {}
        if self.effect is not None:
            found["decision"] = self.effect.value
        if self.reason:
            found["reason"] = self.reason
        if self.arguments is not None:
            found["arguments_replaced"] = True
        if self.note:
            found["note"] = self.note
        if self.mark:
            found["mark"] = self.mark
        return found


def parse(value: Any, when: str) -> Answer:
    """A hook's answer, or `HookFailed` saying what is wrong with it."""
    if value is None:
        return Answer()
    if not isinstance(value, dict):
        raise HookFailed(f"answered {type(value).__name__}, not a JSON object")
    known = PRE_KEYS if when == "pre" else POST_KEYS
    unknown = sorted(set(value) - known)
    if unknown:
        raise HookFailed(
            f"answered unknown key(s) {unknown}; a {when} hook answers {sorted(known)}"
        )
    if when == "post":
        return Answer(note=_text(value, "note", TEXT_CHARS), mark=_text(value, "mark", MARK_CHARS))
    effect = value.get("decision")
    if effect is not None and effect not in Effect.__members__:
        raise HookFailed(f"answered decision {effect!r}; it must be allow, deny or ask")
    arguments = value.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise HookFailed("answered arguments that are not a JSON object")
    return Answer(
        effect=Effect(effect) if effect is not None else None,
        reason=_text(value, "reason", TEXT_CHARS),
        arguments=arguments,
    )


def _text(value: dict[str, Any], key: str, limit: int) -> str:
    text = value.get(key, "")
    if not isinstance(text, str):
        raise HookFailed(f"answered a {key} that is not a string")
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"
