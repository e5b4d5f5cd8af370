"""Sending calls to the workers: one signed task message per call, a stage's
messages (and their task-sent events, for Flower) in one pipelined round trip,
consecutive ordered steps as one chain (`runtime.transport.chain`), and from a
worker, a chain's next step.

Sending a stage through kombu's producer batch is what keeps a batch of reads
from paying a Redis client, a round trip and an event publish per call.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis
import tenacity
from celery import Celery
from kombu.exceptions import BatchPublishError, OperationalError

from runtime.gate.admission import Admitted
from runtime.ledger.store import Ledger
from runtime.results import endings
from runtime.results.redaction import redact
from runtime.transport import chain, channel, signing
from runtime.transport.names import EFFECTS, READS, TASK, TTL_SECONDS, handed_on_key
from runtime.types import Batch, CallMessage, ToolResult

log = logging.getLogger("toolrun.dispatcher")
UNREACHABLE = (*channel.LOST, OperationalError)  # Redis down: kombu wraps its errors
# A producer batch that failed part way: the messages it held may or may not have landed.
UNCERTAIN = (*UNREACHABLE, BatchPublishError)
SHOWN_CHARS = 2048  # what Flower keeps of a call's arguments (it holds thousands of tasks)
FORWARD_PATIENCE = 30.0  # seconds a worker keeps trying to send a chain's next step


class Signer:
    """Signs one batch's task messages: each carries the call, the policy
    snapshot, the decision and where to announce its result, under an HMAC."""

    def __init__(self, key: bytes, batch: Batch, policy: dict[str, Any], *,
                 reply_to: str | None) -> None:  # fmt: skip
        self.key, self.batch, self.reply_to = key, batch, reply_to
        self.snapshot = policy  # every message of the batch carries it
        self.positions = {call.id: index for index, call in enumerate(batch.calls)}

    def message(self, admission: Admitted, approved_by: str | None = None,
                stage: tuple[int, int, bool] | None = None) -> dict[str, Any]:  # fmt: skip
        """One call's signed task message; `stage`: (index, calls in it, last)."""
        call, spec, batch = admission.call, admission.spec, self.batch
        index, size, last = stage or (None, 1, False)
        message = CallMessage(
            batch_id=batch.id, call_id=call.id, tool=spec.name, arguments=call.arguments,
            mode=batch.mode, workspace=batch.workspace, position=self.positions[call.id],
            policy=self.snapshot, decision=admission.decision.as_dict(),
            approved_by=approved_by, on_error=batch.on_error, reply_to=self.reply_to,
            stage=index, stage_size=size, last_stage=last,
        ).model_dump(mode="json")  # fmt: skip
        message[signing.FIELD] = signing.sign(message, self.key)
        return message


def post(app: Celery, messages: list[dict[str, Any]], *, parallel: bool,
         chained: bool = False) -> bool:  # fmt: skip
    """Send signed messages (`chained`: the first carrying the rest) in one
    pipelined round trip with their task-sent events; False if the broker
    could not take them all (what it took may still run: reads are
    at-least-once and side effects claimed, and marks say what was sent)."""
    if chained and len(messages) > 1:
        messages = [chain.link(messages)]
        parallel = False
    queue = READS if parallel else EFFECTS
    try:
        with app.producer_or_acquire() as producer, producer.batch() as batch:
            for index, message in enumerate(messages):
                app.send_task(TASK, producer=producer, **task_options(message, queue))
                if index == 0:
                    batch.flush()  # a worker starts on the first while the rest are sent
        return True
    except UNCERTAIN as error:
        log.warning("broker unreachable while sending %d message(s): %s", len(messages), error)
        return False


def task_options(message: dict[str, Any], queue: str) -> dict[str, Any]:
    """`send_task`'s arguments for a signed message: its queue ("reads" run
    side by side, "effects" in order), and what Flower shows of it (the
    tool's name, redacted arguments)."""
    shown = {"batch_id": message["batch_id"], "call_id": message["call_id"],
             "tool": message["tool"], "arguments": redact(message["arguments"])}  # fmt: skip
    return {
        "args": [message],
        "queue": queue,
        "shadow": f"toolrun.{message['tool']}",
        "argsrepr": _cut(json.dumps([shown], default=str)),
        "kwargsrepr": "{}",
        "ignore_result": True,
    }


def _cut(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    return text[:SHOWN_CHARS] + f"… ({len(text) - SHOWN_CHARS:,} more characters)"


def forward(
    app: Celery, client: redis.Redis, ledger: Ledger, message: dict[str, Any],
    result: ToolResult, *, patience: float = FORWARD_PATIENCE,
) -> bool:  # fmt: skip
    """On the worker: send the next step of `message`'s chain, if it goes on,
    once (a redelivered step that already handed on its chain does not hand it
    on again), trying again while the broker is unreachable for `patience`
    seconds. If it still cannot, each step left ends `error` (none was sent).
    True while the chain goes on: a worker will end its next step."""
    following = chain.follow(message, result)
    if following is None:
        return False
    batch_id = message["batch_id"]
    try:
        if not client.set(handed_on_key(batch_id, message["call_id"]), 1, nx=True,
                          ex=TTL_SECONDS):  # fmt: skip
            return True
        for attempt in tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(UNREACHABLE),
            stop=tenacity.stop_after_delay(patience),
            wait=tenacity.wait_random_exponential(multiplier=0.1, max=2),
            reraise=True,
        ):
            with attempt:
                app.send_task(TASK, **task_options(following, EFFECTS))
        return True
    except Exception as error:  # noqa: BLE001 - every step left still needs its result
        log.error("batch %s: could not start the chain's next step: %s", batch_id, error)
    for step in [following, *following[chain.THEN]]:
        ended = endings.chain_broken(step["call_id"], step["tool"])
        try:
            if ledger.record_result(batch_id, ended):
                channel.publish(client, batch_id, ended, reply_to=step.get("reply_to"))
        except Exception as error:  # noqa: BLE001 - the sweep ends it at the deadline
            log.error("batch %s: the end of %s was not recorded: %s", batch_id,
                      step["call_id"], error)  # fmt: skip
    return False
