"""Consecutive allowed ordered steps sent as one chain: one task message that
carries the steps after the first under `then` (outside the signature: each
step is signed, and checked, on its own).

A worker runs a chain's steps one after another in one task
(`Worker.run`, docs/architecture.md, "A chain in one task"), each checked
again, claimed, limited, recorded and published as if it had come alone. It
goes on to the next step only if the batch may: the step was not cancelled,
and it succeeded or the batch says `on_error="continue"`. A chain whose task
cannot go on (its pool process killed at a step's hard limit) is handed on
as a message of its own, carrying what is left. The client still takes every
step's result from the results channel, and the cluster ends or sends again
the steps a broken chain never reached.
"""

from __future__ import annotations

from typing import Any

from runtime.types import CallMessage, Status, ToolResult


def link(messages: list[CallMessage]) -> CallMessage:
    """The first step's message, carrying the others."""
    return messages[0].model_copy(update={"then": messages[1:]})


def follow(message: CallMessage, result: ToolResult) -> CallMessage | None:
    """The next step's message once `result` ended this one, or None: the
    chain ends here (no more steps, a cancel, or a failure under `stop`)."""
    rest = message.then
    if not rest or result.status is Status.cancelled:
        return None
    if not result.ok and message.on_error != "continue":
        return None
    return rest[0].model_copy(update={"then": rest[1:]})


def step_of(raw: Any, index: int) -> Any:
    """Step `index` of a delivered chain message as a message of its own,
    carrying the steps after it (`raw` itself for 0), without decoding
    anything: the worker's main process needs it to renew, limit and end the
    step that the pool process is running (docs/architecture.md, "A chain in
    one task"). None if the message has no such step."""
    if index == 0:
        return raw
    rest = raw.get("then") if isinstance(raw, dict) else None
    if not isinstance(rest, list) or not 0 < index <= len(rest):
        return None
    found = rest[index - 1]
    return found | {"then": rest[index:]} if isinstance(found, dict) else None


def length(raw: Any) -> int:
    """How many steps a delivered message carries (1 unless it is a chain)."""
    rest = raw.get("then") if isinstance(raw, dict) else None
    return 1 + len(rest) if isinstance(rest, list) else 1
