"""Sending calls to the workers (the `Queue` seam on Celery): one signed task
message per call, a stage's messages (and their task-sent events, for Flower)
in one pipelined round trip, consecutive ordered steps as one chain
(`runtime.transport.chain`).

Sending a stage through kombu's producer batch is what keeps a batch of reads
from paying a Redis client, a round trip and an event publish per call.

Each message carries the time it was posted (`sent_at`, outside the
signature): the worker's queue wait runs from it.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlsplit

import redis
from celery import Celery
from kombu.exceptions import BatchPublishError, OperationalError
from redis.client import Pipeline

from runtime import clock
from runtime.keyspace.names import EFFECTS, READS, TASK
from runtime.redaction import BUILT_IN, Redactor
from runtime.transport import chain
from runtime.transport.stencil import Stencils
from runtime.types import CallMessage

log = logging.getLogger("toolrun.dispatcher")
# The broker down (kombu wraps its errors), or a producer batch that failed part
# way: the messages it held may or may not have landed.
UNCERTAIN = (redis.ConnectionError, redis.TimeoutError, OperationalError, BatchPublishError)
SAME_REDIS = {"redis", "rediss", "unix"}  # a broker URL that can name the state's Redis
SHOWN_CHARS = 2048  # what Flower keeps of a call's arguments (it holds thousands of tasks)
# A stage's messages per round trip. A pipeline holds every payload it carries,
# and redis-py packs a copy of them all as it sends: a first stage of 1,000
# reads (the default size cap) in one pipeline was 9 MB of the submitter's
# 20 MB peak (docs/architecture.md, "Round trips and memory"). A hundred keep
# a round trip's share of the stage's send near 1%, and a smaller stage whole.
ROUND_MESSAGES = 100
COMMANDS = 2  # a message's on a producer batch: its LPUSH and its task-sent event's PUBLISH


class CeleryQueue:
    def __init__(self, app: Celery, *, redactor: Redactor = BUILT_IN) -> None:
        self.app, self.redactor = app, redactor
        self.stencils = Stencils(app)  # Celery's reads message, filled in (`ride`)
        # The broker is the state's Redis (the default: one Redis is both), so a
        # message's commands can ride the state's pipeline (`ride`).
        self.rides = (
            urlsplit(str(app.conf.broker_url)).scheme in SAME_REDIS
            and app.conf.broker_url == app.conf.result_backend
        )

    def post(self, messages: list[CallMessage], *, parallel: bool, chained: bool = False) -> bool:
        """Send signed messages (`chained`: the first carrying the rest) in
        pipelined round trips of `ROUND_MESSAGES` with their task-sent events
        (the first alone, for a worker to start on); False if the broker could
        not take them all (what it took may still run: reads are at-least-once
        and side effects claimed, and marks say what was sent)."""
        if chained and len(messages) > 1:
            messages, parallel = [chain.link(messages)], False
        queue = READS if parallel else EFFECTS
        try:
            with (
                self.app.producer_or_acquire() as producer,
                producer.batch(max_size=ROUND_MESSAGES * COMMANDS) as batch,
            ):
                for index, message in enumerate(messages):
                    options = task_options(message, queue, self.redactor, sent_at=clock.now())
                    self.app.send_task(TASK, producer=producer, result_cls=_Sent, **options)
                    if index == 0:
                        batch.flush()  # a worker starts on the first while the rest are sent
            return True
        except UNCERTAIN as error:
            log.warning("broker unreachable while sending %d message(s): %s", len(messages), error)
            return False

    def ride(self, pipe: Pipeline, messages: list[CallMessage]) -> None:
        """Put reads' messages on `pipe`, a pipeline of the state's Redis that
        is the broker too (`rides`), for its owner to send: each message's
        LPUSH and its task-sent event's PUBLISH, as kombu's producer batch
        makes them, riding the round trip of the send marks
        (docs/architecture.md, "Round trips and memory").

        Celery builds the message as ever; what it would wrap around the
        publish is left out, as nothing here touches the network: no retry
        (the round trip is the owner's `execute`, whose failure the owner
        handles) and no declaring of the queue, which the message does not
        go through (Celery sends it on the default exchange with the queue's
        name as its key, a Redis list the workers declared); the task-sent
        event still declares its exchange, which routes it. Once this
        process has sent two messages so, the rest are filled into Celery's
        first (`runtime.transport.stencil`), when it may stand for them."""
        stencil = self.stencils.usable()
        if stencil is not None:
            for message in messages:
                options = task_options(message, READS, self.redactor, sent_at=clock.now())
                commands = stencil.commands_for(
                    options["args"][0],
                    options["shadow"],
                    options["argsrepr"],
                    self.stencils.values(),
                )
                for name, args in commands:
                    getattr(pipe, name)(*args)
            return
        with self.app.producer_or_acquire() as producer:
            for message in messages:
                options = task_options(message, READS, self.redactor, sent_at=clock.now())
                riding = _Riding(pipe, learning=self.stencils.wanted())
                producer._batch_local.current = riding  # kombu 5.7's producer batch slot
                try:
                    self.app.send_task(
                        TASK,
                        producer=producer,
                        retry=False,
                        declare=[],
                        result_cls=_Sent,
                        **options,
                    )
                finally:
                    del producer._batch_local.current
                if riding.commands is not None:
                    self.stencils.learn(riding.commands, options["args"][0])


class _Sent:
    """What `send_task` hands back for a message sent here: its id. Its
    default, an `AsyncResult`, ties a promise to the result backend on the
    way in and leaves it on the way out, for a result no one asks for."""

    __slots__ = ("id", "ignored")

    def __init__(self, task_id: str) -> None:
        self.id = task_id


class _Riding:
    """kombu's Redis publish batch (`kombu.transport.redis.PublishBatch`) on a
    pipeline of ours: the channel routes each message and hands its final
    commands to `add`, which puts them on the pipeline instead of sending."""

    def __init__(self, pipe: Pipeline, *, learning: bool = False) -> None:
        """`learning`: keep the commands too (`commands`), for a stencil."""
        self.pipe = pipe
        self.commands: list[tuple[str, tuple[Any, ...]]] | None = [] if learning else None

    def publish(self, channel: Any, message: Any, **options: Any) -> Any:
        return channel.basic_publish(message, _publish_batch=self, **options)

    def add(self, name: str, *args: Any) -> None:
        getattr(self.pipe, name)(*args)
        if self.commands is not None:
            self.commands.append((name, args))


def task_options(
    message: CallMessage,
    queue: str,
    redactor: Redactor = BUILT_IN,
    *,
    sent_at: float | None = None,
) -> dict[str, Any]:
    """`send_task`'s arguments for a signed message: its queue ("reads" run
    side by side, "effects" in order), what Flower shows of it (the tool's
    name, redacted arguments), and the time it is posted (`sent_at`)."""
    shown = {
        "batch_id": message.batch_id,
        "call_id": message.call_id,
        "tool": message.tool,
        "arguments": redactor.redact(message.arguments),
    }
    wire = message.wire()
    if sent_at is not None:
        wire["sent_at"] = sent_at
    return {
        "args": [wire],
        "queue": queue,
        "shadow": f"toolrun.{message.tool}",
        "argsrepr": _cut(json.dumps([shown], default=str)),
        "kwargsrepr": "{}",
        "ignore_result": True,
    }


def _cut(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    return text[:SHOWN_CHARS] + f"… ({len(text) - SHOWN_CHARS:,} more characters)"
