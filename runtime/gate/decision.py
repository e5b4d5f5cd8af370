"""What the permission gate decides, as a value that says who decided it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Effect(StrEnum):
    allow = "allow"
    ask = "ask"
    deny = "deny"


@dataclass(frozen=True)
class Decision:
    """An effect, the reason a model or a human can read, the rule that made it
    (`write_file(*.md)`, `mode:auto`, `workspace`) and where that rule lives
    (a settings file, `submit`, `mode`, `approval`)."""

    effect: Effect
    reason: str
    rule: str
    source: str = "runtime"

    @classmethod
    def allow(cls, reason: str, *, rule: str, source: str = "runtime") -> Decision:
        return cls(Effect.allow, reason, rule, source)

    @classmethod
    def ask(cls, reason: str, *, rule: str, source: str = "runtime") -> Decision:
        return cls(Effect.ask, reason, rule, source)

    @classmethod
    def deny(cls, reason: str, *, rule: str, source: str = "runtime") -> Decision:
        return cls(Effect.deny, reason, rule, source)

    def as_dict(self) -> dict[str, str]:
        return {
            "effect": self.effect.value,
            "reason": self.reason,
            "rule": self.rule,
            "source": self.source,
        }
