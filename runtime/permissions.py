"""The permission gate: mode × risk × the input itself → a `Decision`.

One piece of code, used by the client before it plans a batch and by the worker
again right before the tool runs. Decisions are values that carry the rule or
policy that made them, so the ledger can say why.

This is the minimal gate: the mode table of DESIGN.md and input-aware path
confinement. Rules from settings files, approvals and workspace trust extend
`evaluate` by adding sources of decisions ahead of the mode table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel

from runtime.errors import PathOutsideWorkspace
from runtime.registry import CapabilitySpec
from runtime.types import Mode, Risk
from runtime.workspace import resolve_inside


class Effect(StrEnum):
    allow = "allow"
    ask = "ask"
    deny = "deny"


@dataclass(frozen=True)
class Decision:
    """What the gate decided, and which rule or policy decided it."""

    effect: Effect
    reason: str
    rule: str

    @classmethod
    def allow(cls, reason: str, *, rule: str) -> Decision:
        return cls(Effect.allow, reason, rule)

    @classmethod
    def ask(cls, reason: str, *, rule: str) -> Decision:
        return cls(Effect.ask, reason, rule)

    @classmethod
    def deny(cls, reason: str, *, rule: str) -> Decision:
        return cls(Effect.deny, reason, rule)

    @property
    def allowed(self) -> bool:
        return self.effect is Effect.allow


A, Q, D = Effect.allow, Effect.ask, Effect.deny

# DESIGN.md's table. `auto` lets writes and external calls run until rules exist
# (the minimal gate of the vertical slice); `plan` never reaches this table for a
# non-read tool, because capability policy disables it first.
MODE_TABLE: dict[Mode, dict[Risk, Effect]] = {
    Mode.plan: {
        Risk.read: A,
        Risk.write: D,
        Risk.external: D,
        Risk.destructive: D,
        Risk.unknown: D,
    },
    Mode.default: {
        Risk.read: A,
        Risk.write: Q,
        Risk.external: Q,
        Risk.destructive: Q,
        Risk.unknown: Q,
    },
    Mode.accept_edits: {
        Risk.read: A,
        Risk.write: A,
        Risk.external: Q,
        Risk.destructive: Q,
        Risk.unknown: Q,
    },
    Mode.auto: {
        Risk.read: A,
        Risk.write: A,
        Risk.external: A,
        Risk.destructive: D,
        Risk.unknown: D,
    },
    Mode.bypass: {
        Risk.read: A,
        Risk.write: A,
        Risk.external: A,
        Risk.destructive: D,
        Risk.unknown: Q,
    },
}


def evaluate(
    spec: CapabilitySpec, arguments: BaseModel, *, mode: Mode, workspace: Path
) -> Decision:
    """The gate. Input checks first: a path outside the workspace is denied
    whatever the mode says."""
    for path in spec.subject_paths(arguments):
        try:
            resolve_inside(workspace, path)
        except PathOutsideWorkspace as error:
            return Decision.deny(str(error), rule="workspace")
    effect = MODE_TABLE[mode][spec.risk]
    reason = f"{spec.risk.value} tools {_verb(effect)} in {mode.value} mode"
    return Decision(effect, reason, f"mode:{mode.value}")


def _verb(effect: Effect) -> str:
    return {A: "run", Q: "need approval", D: "are denied"}[effect]
