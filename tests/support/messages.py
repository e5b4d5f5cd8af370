"""Build policies and task messages the way the client does, for tests that talk
to the executor or push messages into the broker themselves."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from runtime.batch.plan import BatchPlan, build
from runtime.batch.signer import Signer
from runtime.gate.admission import admit
from runtime.gate.decision import Decision
from runtime.gate.policy import Policy
from runtime.gate.rules import Effect, Level, parse
from runtime.registry.capabilities import Registry
from runtime.transport import signing
from runtime.types import Batch, CallMessage, Mode

KEY = b"test-signing-key"


def policy(workspace: Path, *, trusted: bool = True, roots=None, **rules: list[str]) -> Policy:
    """A policy with batch-level rules: policy(ws, allow=["bump"], deny=[...])."""
    parsed = tuple(
        parse(text, Effect(effect), Level.batch, "submit")
        for effect, texts in rules.items()
        for text in texts
    )
    return Policy(parsed, trusted, roots, str(Path(workspace).resolve()), "test")


def message(
    call_id: str,
    tool: str,
    arguments: Any,
    *,
    workspace: Path,
    mode: Mode = Mode.auto,
    batch_id: str = "b1",
    key: bytes | None = KEY,
    rules: dict[str, list[str]] | None = None,
    decision: Decision | None = None,
    approved_by: str | None = None,
    on_error: str = "stop",
) -> dict[str, Any]:
    data = CallMessage(
        batch_id=batch_id,
        call_id=call_id,
        tool=tool,
        arguments=arguments,
        mode=mode,
        workspace=str(Path(workspace).resolve()),
        position=0,
        policy=policy(workspace, **(rules or {})).snapshot(),
        decision=(decision or Decision.allow("test", rule="test")).as_dict(),
        approved_by=approved_by,
        on_error=on_error,
    ).model_dump(mode="json")
    if key is not None:
        data[signing.FIELD] = signing.sign(data, key)
    return data


def signed_plan(registry: Registry, batch: Batch, rules: Policy) -> BatchPlan:
    """The plan of `batch` as a submitter builds it: each call admitted under
    `rules`, its message signed with `KEY`, no reply channel, a minute to go."""
    workspace = Path(batch.workspace)
    admissions = [
        admit(c, registry=registry, mode=batch.mode, workspace=workspace, policy=rules)
        for c in batch.calls
    ]
    signer = Signer(KEY, batch, rules.snapshot(), reply_to=None)
    return build(
        batch,
        admissions,
        sign=lambda a, where: signer.message(a, stage=where),
        policy=signer.snapshot,
        reply_to=None,
        deadline=time.time() + 60,
        approval_timeout=30,
    )
