"""A submit key's fingerprint: everything a submit fixes that decides what
runs, so that the same key again attaches only to exactly that batch
(docs/architecture.md, "Attach and keys")."""

from __future__ import annotations

import hashlib
import json

from runtime.errors import KeyConflict
from runtime.gate.policy import Policy
from runtime.ledger.tables import BatchRow
from runtime.types import Batch


def fingerprint(batch: Batch, policy: Policy) -> str:
    """What a submit key stands for: everything the submit fixes that decides
    what runs. The calls and their arguments, the mode, workspace and
    `on_error`, and the policy (every level's rules, the batch's own `rules`
    included, the workspace's trust and the org's roots: its whole snapshot).
    Arguments no JSON can carry (refused at admission anyway) count by their call."""
    body = [
        batch.mode.value,
        batch.workspace,
        batch.on_error,
        policy.snapshot(),
        [[call.id, call.name, _json(call.arguments)] for call in batch.calls],
    ]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def check_key(known: BatchRow, batch: Batch, policy: Policy, key: str) -> None:
    """A submit of `key` again may attach to the batch the key started only if
    it asks for exactly that batch; otherwise `KeyConflict`, saying what
    differs, before this submit has written anything (docs/architecture.md,
    "Attach and keys"). A batch an older toolrun recorded from a buffer has
    no fingerprint: its columns are compared."""
    differs = [
        name
        for name, ours, theirs in (
            ("mode", batch.mode.value, known.mode),
            ("workspace", batch.workspace, known.workspace),
            ("on_error", batch.on_error, known.on_error),
            ("rules or policy", policy.version, known.policy_version),
        )
        if ours != theirs
    ]
    if known.fingerprint is None and not differs:
        return
    if known.fingerprint != fingerprint(batch, policy):
        what = ", ".join(differs or ["calls"])
        raise KeyConflict(
            f"key {key!r} was used for a batch of other {what}; submit with another key",
            differs=what,
        )


def _json(value: object) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (ValueError, TypeError, RecursionError):
        return "(not serializable)"
