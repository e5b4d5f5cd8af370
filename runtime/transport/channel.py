"""The results channel: how a worker hands a finished call back to its batch.

A worker stores the result in the batch's Redis hash and publishes it on the
channel of the client that sent the call, in one pipelined round trip. The
client subscribes before it sends anything (`runtime.transport.listener`), so it never
misses a result, and reads the hash when it wants to be sure (a dropped
connection loses pub/sub messages, not keys). Celery's `GroupResult.get()`
polls; this does not.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis
import tenacity

from runtime.types import ToolResult

log = logging.getLogger("toolrun.channel")
TTL_SECONDS = 24 * 3600
SWEEP_SECONDS = 1.0  # how often a listener also reads the results hash
RECONNECT_SECONDS = 0.5  # the pause before subscribing again after a lost connection
LOST = (redis.ConnectionError, redis.TimeoutError)


def key(batch_id: str) -> str:
    """A batch's results hash, and its channel (cancel notices, and results of
    messages that name no `reply_to`)."""
    return f"toolrun:batch:{batch_id}:results"


BATCHES = key("*")  # every batch's channel, as a pattern


def batch_of(channel: str) -> str:
    """The batch id in a batch channel's name."""
    return channel.removeprefix("toolrun:batch:").removesuffix(":results")


def reply_channel(client_id: str) -> str:
    """Where workers publish the results of one client's calls."""
    return f"toolrun:client:{client_id}:results"


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
            pipe.hset(key(batch_id), result.call_id, payload)
            pipe.expire(key(batch_id), TTL_SECONDS)
            pipe.publish(reply_to or key(batch_id), announced)
            pipe.execute()
    return payload


def give_up(client: redis.Redis, batch_id: str, result: ToolResult) -> None:
    """Store the end a client gave a call no worker answered in time, unless a
    worker's result is there already: a worker that takes the call's message
    later (a restarted one) finds it and does not run the call."""
    with client.pipeline(transaction=False) as pipe:
        pipe.hsetnx(key(batch_id), result.call_id, result.model_dump_json())
        pipe.expire(key(batch_id), TTL_SECONDS)
        pipe.execute()


def stored(client: redis.Redis, batch_id: str, call_ids: list[str]) -> list[ToolResult]:
    """Results already stored for `call_ids` (those not finished are left out)."""
    if not call_ids:
        return []
    values = client.hmget(key(batch_id), call_ids)
    return [ToolResult.model_validate_json(value) for value in values if value]


def cancel_key(batch_id: str) -> str:
    return f"toolrun:batch:{batch_id}:cancelled"


def cancel(client: redis.Redis, batch_id: str, *, by: str) -> None:
    """Mark a batch cancelled (workers start none of its calls from now on) and
    wake its dispatcher, wherever it runs."""
    with client.pipeline(transaction=False) as pipe:
        pipe.set(cancel_key(batch_id), by, ex=TTL_SECONDS)
        pipe.publish(key(batch_id), CANCEL)
        pipe.execute()


CANCEL = "__cancel__"


def deliveries_key(batch_id: str) -> str:
    return f"toolrun:batch:{batch_id}:deliveries"


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
            pipe.hget(key(batch_id), call_id)
            cancelled, delivery, _, stored_result = pipe.execute()
        result = ToolResult.model_validate_json(stored_result) if stored_result else None
        return Look(bool(cancelled), int(delivery), result)

    def cancelled(self, batch_id: str) -> bool:
        return bool(self.client.exists(cancel_key(batch_id)))

    def recall(self, batch_id: str, call_id: str) -> ToolResult | None:
        found = stored(self.client, batch_id, [call_id])
        return found[0] if found else None
