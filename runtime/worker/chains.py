"""A chain's hand-on, from the worker that ended a step: its next step sent
once, while the broker can take it; if it cannot, every step left ends
`error`, none sent (docs/architecture.md, "A chain in one task")."""

from __future__ import annotations

import logging

import tenacity

from runtime.ledger.store import Ledger
from runtime.results import endings
from runtime.transport import chain
from runtime.transport.base import BatchState, Queue, ResultBus
from runtime.types import CallMessage, ToolResult

log = logging.getLogger("toolrun.worker")


def hand_on(
    message: CallMessage,
    result: ToolResult,
    *,
    state: BatchState,
    queue: Queue,
    ledger: Ledger,
    patience: float,
) -> bool:
    """Send the next step of `message`'s chain, if it goes on, once (a
    redelivered step that already handed its chain on does not again),
    trying again while the broker cannot take it. If it still cannot, each
    step left ends `error`: none was sent. True while the chain goes on."""
    following = chain.follow(message, result)
    if following is None:
        return False
    try:
        if not state.hand_on(message.batch_id, message.call_id):
            return True
        for attempt in tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda taken: not taken),
            stop=tenacity.stop_after_delay(patience),
            wait=tenacity.wait_random_exponential(multiplier=0.1, max=2),
        ):
            with attempt:
                taken = queue.post([following], parallel=False)
            if not attempt.retry_state.outcome.failed:
                attempt.retry_state.set_result(taken)
        if taken:
            return True
    except Exception as error:  # noqa: BLE001 - every step left still needs its end
        log.error("batch %s: could not hand the chain on: %s", message.batch_id, error)
    _break_chain(following, state, ledger)
    return False


def _break_chain(following: CallMessage, state: ResultBus, ledger: Ledger) -> None:
    for step in [following, *following.then]:
        ended = endings.chain_broken(step.call_id, step.tool)
        try:
            if ledger.record_result(step.batch_id, ended):
                state.publish(step.batch_id, ended, reply_to=step.reply_to)
        except Exception as error:  # noqa: BLE001 - the sweep ends it at the deadline
            log.error(
                "batch %s: the end of %s was not recorded: %s",
                step.batch_id,
                step.call_id,
                error,
            )
