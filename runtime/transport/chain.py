"""Consecutive ordered steps sent as one chain, so that each step starts on the
worker that ended the one before it instead of going back to the client.

The client signs every step's message as it would alone and sends the first,
carrying the rest under `then` (outside the signature: each step is checked
on its own). A worker that ends a step sends the next one only if the batch
may go on: the step was not cancelled, and it succeeded or the batch says
`on_error="continue"`. The client still takes every step's result from the
results channel, and ends the steps a broken chain never reached.
"""

from __future__ import annotations

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
