"""The results channel: how a worker hands a finished call back to its batch.

A worker stores the result in the batch's Redis hash and publishes it on the
batch's pub/sub channel in one pipelined round trip. The client subscribes
before it sends anything, so it never misses a result, and reads the hash when
it wants to be sure (a dropped connection loses pub/sub messages, not keys).
Celery's `GroupResult.get()` polls; this does not.
"""

from __future__ import annotations

import redis

from runtime.types import ToolResult

TTL_SECONDS = 24 * 3600


def key(batch_id: str) -> str:
    return f"toolrun:batch:{batch_id}:results"


def publish(client: redis.Redis, batch_id: str, result: ToolResult) -> str:
    """Store and announce `result`; returns its JSON."""
    payload = result.model_dump_json()
    with client.pipeline(transaction=False) as pipe:
        pipe.hset(key(batch_id), result.call_id, payload)
        pipe.expire(key(batch_id), TTL_SECONDS)
        pipe.publish(key(batch_id), payload)
        pipe.execute()
    return payload


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


class Board:
    """What a worker reads of a batch in Redis: whether it was cancelled, and
    the result a call already published (for a redelivered message)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def cancelled(self, batch_id: str) -> bool:
        return bool(self.client.exists(cancel_key(batch_id)))

    def recall(self, batch_id: str, call_id: str) -> ToolResult | None:
        found = stored(self.client, batch_id, [call_id])
        return found[0] if found else None
