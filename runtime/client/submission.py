"""What a submit is checked and fixed by before anything is written: the
batch made from the calls (or a provider message's), its size and names, the
open-batch cap, and the policy it runs under (the settings files', the
batch's rules, the rules its submitter's answers remembered). Helpers of
`runtime.client.runtime`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime import adapters
from runtime.adapters import Format, ModelTurn
from runtime.client.intake import (
    batch_from,
    check_name,
    check_open,
    check_size,
    check_submission,
    keyed_id,
    principal,
    submitted_turn_key,
)
from runtime.client.remembering import remembered_for
from runtime.errors import InvalidBatch
from runtime.flow.limits import Limits
from runtime.gate.policy import Policy, PolicySources
from runtime.ledger.store import Ledger
from runtime.registry.capabilities import Registry
from runtime.types import Batch, Mode, OnError, ToolCall


@dataclass(frozen=True)
class Submission:
    batch: Batch  # its id the key's when a key was given
    policy: Policy  # fixed now, for the batch's whole life
    submitter: str
    open_cap: int | None  # the submitter's cap on open batches, checked again as it is recorded


def submission(
    calls: Batch | Iterable[ToolCall | dict[str, Any]],
    *,
    policies: PolicySources,
    ledger: Ledger,
    registry: Registry,
    in_redis: bool,
    mode: Mode | str | None,
    workspace: str | Path | None,
    on_error: OnError | None,
    rules: dict[str, list[str]] | None,
    key: str | None,
    conversation: str | None,
    submitter: str | None,
) -> Submission:
    """The submit checked, or InvalidBatch (a subclass for a cap) saying why.
    `in_redis`: whether the transport holds limits in Redis; the in-process
    one refuses a project file's limits that need it."""
    batch = batch_from(calls, mode=mode, workspace=workspace, on_error=on_error)
    check_size(policies.limits, batch)
    check_name("conversation", conversation)
    check_name("submitter", submitter)
    check_submission(key, rules)
    submitter = submitter or principal()
    cap = check_open(policies.limits, ledger, submitter)
    policy = policies.policy_for(
        Path(batch.workspace), rules, remembered_for(ledger, registry, batch, submitter)
    ).counted_for(submitter)
    if not in_redis and (held := Limits.from_snapshot(policy.limits).held_in_redis()):
        raise InvalidBatch(f"{'; '.join(held)} need Redis: this transport cannot hold them")
    if key is not None:
        batch = batch.model_copy(update={"id": keyed_id(key)})
    return Submission(batch, policy, submitter, cap)


def turn_of(
    ledger: Ledger, message: Any, format: Format | None, options: dict[str, Any]
) -> ModelTurn:
    """The tool calls of a provider message (`Runtime.submit_message`); without
    a `key` in `options`, the turn's key is set there: the provider's call ids,
    scoped to the submitter, so the same turn again attaches."""
    turn = adapters.parse(message, format)
    if not turn.calls:
        raise InvalidBatch("the message holds no tool calls to run")
    if options.get("key") is None:
        options["key"] = submitted_turn_key(
            ledger,
            turn,
            options.get("workspace"),
            options.get("submitter") or principal(),
            (options.get("owner") or {}).get("key_id"),
        )
    return turn
