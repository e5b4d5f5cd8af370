"""Sending calls to the workers: from the client, one signed task message per
call, a stage's messages (and their task-sent events, for Flower) in one
pipelined round trip, consecutive ordered steps as one chain (`runtime.transport.chain`),
and while the broker is unreachable, retries until the batch's deadline; from
a worker, a chain's next step.

Sending a stage through kombu's producer batch is what keeps a batch of reads
from paying a Redis client, a round trip and an event publish per call.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import redis
import tenacity
from celery import Celery
from kombu.exceptions import BatchPublishError, OperationalError

from runtime.gate.admission import Admitted
from runtime.gate.policy import Policy
from runtime.ledger.store import Ledger
from runtime.results import formatter as results
from runtime.results.redaction import redact
from runtime.transport import chain, channel, signing
from runtime.types import Batch, CallMessage, Status, ToolResult

log = logging.getLogger("toolrun.dispatcher")
TASK = "toolrun.execute"
READS, EFFECTS = "reads", "effects"  # the queues: reads run side by side, effects in order
UNREACHABLE = (*channel.LOST, OperationalError)  # Redis down: kombu wraps its errors
# A producer batch that failed part way: the messages it held may or may not have landed.
UNCERTAIN = (*UNREACHABLE, BatchPublishError)
SHOWN_CHARS = 2048  # what Flower keeps of a call's arguments (it holds thousands of tasks)
FORWARD_PATIENCE = 30.0  # seconds a worker keeps trying to send a chain's next step


class Outbox:
    def __init__(
        self, app: Celery, key: bytes, batch: Batch, policy: Policy, *, reply_to: str
    ) -> None:
        self.app, self.key, self.batch, self.reply_to = app, key, batch, reply_to
        self.snapshot = policy.snapshot()  # every message of the batch carries it
        self.positions = {call.id: index for index, call in enumerate(batch.calls)}

    def send(
        self,
        admitted: list[Admitted],
        approved_by: dict[str, str],
        deadline: Callable[[], float],
        *,
        chained: bool = False,
    ) -> list[Admitted]:
        """Send each admitted call (`chained`: as one chain of ordered steps, in
        this order); returns those the broker did not take before `deadline()`
        (a monotonic time, read again on every retry)."""

        def task(admission: Admitted) -> dict:
            queue = READS if admission.spec.parallel else EFFECTS
            return task_options(self._message(admission, approved_by), queue)

        if chained and len(admitted) > 1:
            tasks = [task(admission) for admission in admitted]
            head = tasks[0] | {"args": [chain.link([t["args"][0] for t in tasks])]}
            return [] if self._publish(head, deadline) else list(admitted)
        tasks, flushed = [], 0
        try:
            with self.app.producer_or_acquire() as producer, producer.batch() as batch:
                for admission in admitted:  # each built just before it is sent
                    tasks.append(task(admission))
                    self.app.send_task(TASK, producer=producer, **tasks[-1])
                    if len(tasks) == 1:
                        batch.flush()  # a worker starts on the first while the rest are built
                        flushed = 1
            return []
        except UNCERTAIN as error:
            log.warning("batch %s: broker unreachable, sending one by one: %s", self.batch.id,
                        error)  # fmt: skip
        # What the failed pipeline held may have landed too: only reads ride in one
        # with others, and a read delivered twice is answered once.
        tasks += [task(admission) for admission in admitted[len(tasks) :]]
        rest = zip(admitted[flushed:], tasks[flushed:], strict=True)
        return [a for a, t in rest if not self._publish(t, deadline)]

    def _message(self, admission: Admitted, approved_by: dict[str, str]) -> dict:
        """One call's signed task message."""
        call, spec, batch = admission.call, admission.spec, self.batch
        message = CallMessage(
            batch_id=batch.id, call_id=call.id, tool=spec.name, arguments=call.arguments,
            mode=batch.mode, workspace=batch.workspace, position=self.positions[call.id],
            policy=self.snapshot, decision=admission.decision.as_dict(),
            approved_by=approved_by.get(call.id), on_error=batch.on_error,
            reply_to=self.reply_to,
        ).model_dump(mode="json")  # fmt: skip
        message[signing.FIELD] = signing.sign(message, self.key)
        return message

    def _publish(self, task: dict, deadline: Callable[[], float]) -> bool:
        """Send one task, trying again while the broker is unreachable (a Redis
        restart); False once the deadline would pass."""
        while True:
            try:
                self.app.send_task(TASK, **task)
                return True
            except UNREACHABLE as error:
                if time.monotonic() + channel.RECONNECT_SECONDS >= deadline():
                    return False
                log.warning("batch %s: broker unreachable, sending again: %s", self.batch.id,
                            error)  # fmt: skip
                time.sleep(channel.RECONNECT_SECONDS)


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
) -> None:  # fmt: skip
    """On the worker: send the next step of `message`'s chain, if it goes on,
    once (a redelivered step that already handed on its chain does not hand it
    on again), trying again while the broker is unreachable for `patience`
    seconds. If it still cannot, each step left ends `error` (none was sent),
    recorded and published, so the client does not wait until its deadline."""
    following = chain.follow(message, result)
    if following is None:
        return
    batch_id = message["batch_id"]
    try:
        if not client.set(chain.handed_on_key(batch_id, message["call_id"]), 1, nx=True,
                          ex=channel.TTL_SECONDS):  # fmt: skip
            return
        for attempt in tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(UNREACHABLE),
            stop=tenacity.stop_after_delay(patience),
            wait=tenacity.wait_random_exponential(multiplier=0.1, max=2),
            reraise=True,
        ):
            with attempt:
                app.send_task(TASK, **task_options(following, EFFECTS))
        return
    except Exception as error:  # noqa: BLE001 - every step left still needs its result
        log.error("batch %s: could not start the chain's next step: %s", batch_id, error)
    text = "the broker (Redis) could not take this step after the one before it; it did not run"
    for step in [following, *following[chain.THEN]]:
        ended = results.failure(step["call_id"], step["tool"], Status.error, text, kind="broker")
        ledger.eventually(lambda ended=ended: ledger.record_result(batch_id, ended))
        try:
            channel.publish(client, batch_id, ended, reply_to=step.get("reply_to"))
        except channel.LOST:  # the client's deadline ends it; its row is recorded
            log.error("batch %s: the end of %s could not be published", batch_id, step["call_id"])
