"""The results channel: how a worker hands a finished call back to its batch.

A worker stores the result in the batch's Redis hash and publishes it on the
channel of the client that sent the call, in one pipelined round trip. The
client subscribes before it sends anything (`runtime.transport.listener`), so it never
misses a result, and reads the hash when it wants to be sure (a dropped
connection loses pub/sub messages, not keys). Celery's `GroupResult.get()`
polls; this does not.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
import tenacity

from runtime.transport.names import (
    CANCEL_NOTICE,
    TTL_SECONDS,
    approval_arguments_key,
    approvals_channel,
    cancel_key,
    deliveries_key,
    results_key,
)
from runtime.types import ToolResult

log = logging.getLogger("toolrun.channel")
SWEEP_SECONDS = 1.0  # how often a listener also reads the results hash
RECONNECT_SECONDS = 0.5  # the pause before subscribing again after a lost connection
LOST = (redis.ConnectionError, redis.TimeoutError)


def publish(
    client: redis.Redis,
    batch_id: str,
    result: ToolResult,
    *,
    reply_to: str | None = None,
    patience: float = 0.0,
) -> str:
    """Store and announce `result` (on `reply_to`, as "<batch id>\\n<JSON>",
    else on the batch's channel); returns its JSON. While Redis cannot be
    reached (a restart), try again for up to `patience` seconds: the call has
    ended, and its result is all that is left of it. Publishing twice is
    harmless (the hash keeps one value; a batch takes one result per call)."""
    payload = result.model_dump_json()
    announced = f"{batch_id}\n{payload}" if reply_to else payload
    for attempt in tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(LOST),
        stop=tenacity.stop_after_delay(patience),
        wait=tenacity.wait_random_exponential(multiplier=0.1, max=2),
        reraise=True,
    ):
        with attempt, client.pipeline(transaction=False) as pipe:
            pipe.hset(results_key(batch_id), result.call_id, payload)
            pipe.expire(results_key(batch_id), TTL_SECONDS)
            pipe.publish(reply_to or results_key(batch_id), announced)
            pipe.execute()
    return payload


def stored(client: redis.Redis, batch_id: str, call_ids: list[str]) -> list[ToolResult]:
    """Results already stored for `call_ids` (those not finished are left out)."""
    if not call_ids:
        return []
    values = client.hmget(results_key(batch_id), call_ids)
    return [ToolResult.model_validate_json(value) for value in values if value]


def cancel(client: redis.Redis, batch_id: str, *, by: str) -> None:
    """Mark a batch cancelled (workers start none of its calls from now on) and
    wake its dispatcher, wherever it runs."""
    with client.pipeline(transaction=False) as pipe:
        pipe.set(cancel_key(batch_id), by, ex=TTL_SECONDS)
        pipe.publish(results_key(batch_id), CANCEL_NOTICE)
        pipe.execute()


@dataclass(frozen=True)
class Look:
    """What a worker finds about a call before running it, in one round trip."""

    cancelled: bool  # its batch was cancelled
    delivery: int  # how many times its message has reached a worker, this time included
    result: ToolResult | None  # a result already published (a redelivered message)


class Board:
    """What a worker reads of a batch in Redis: whether it was cancelled, how
    often a call was delivered, and the result a call already published."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def look(self, batch_id: str, call_id: str) -> Look:
        """Cancel flag, delivery count (counted here) and stored result, in one
        pipelined round trip: reads and idempotent calls keep their deliveries
        here, not in the ledger, so each costs one ledger transaction in all."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.exists(cancel_key(batch_id))
            pipe.hincrby(deliveries_key(batch_id), call_id, 1)
            pipe.expire(deliveries_key(batch_id), TTL_SECONDS)
            pipe.hget(results_key(batch_id), call_id)
            cancelled, delivery, _, stored_result = pipe.execute()
        result = ToolResult.model_validate_json(stored_result) if stored_result else None
        return Look(bool(cancelled), int(delivery), result)

    def cancelled(self, batch_id: str) -> bool:
        return bool(self.client.exists(cancel_key(batch_id)))

    def recall(self, batch_id: str, call_id: str) -> ToolResult | None:
        found = stored(self.client, batch_id, [call_id])
        return found[0] if found else None


class RedisDoorbell:
    """Approvals' answers on Redis: a pub/sub message wakes the batch waiting
    for one, and updated arguments wait under a key of their own."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def ring(self, batch_id: str, call_id: str) -> None:
        self.client.publish(approvals_channel(batch_id), call_id)

    @contextmanager
    def listening(self, batch_id: str) -> Iterator[_Subscription]:
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(approvals_channel(batch_id))
        try:
            yield _Subscription(pubsub)
        finally:
            pubsub.close()

    def stash(self, batch_id: str, call_id: str, arguments: Any) -> None:
        key = approval_arguments_key(batch_id, call_id)
        self.client.set(key, json.dumps({"arguments": arguments}), ex=TTL_SECONDS)

    def unstash(self, batch_id: str, call_id: str) -> Any | None:
        stored = self.client.get(approval_arguments_key(batch_id, call_id))
        return json.loads(stored)["arguments"] if stored else None


@dataclass(frozen=True)
class _Subscription:
    pubsub: redis.client.PubSub

    def wait(self, timeout: float) -> None:
        self.pubsub.get_message(timeout=timeout)
