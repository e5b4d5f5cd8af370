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
import time
from dataclasses import dataclass

import redis
import tenacity

from runtime.transport.names import (
    CANCEL_NOTICE,
    TTL_SECONDS,
    cancel_key,
    deliveries_key,
    results_key,
    sent_key,
    stages_key,
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
    stage: int | None = None,
) -> int | None:
    """Store and announce `result` (on `reply_to`, as "<batch id>\\n<JSON>",
    else on the batch's channel), and count it as one more end of its `stage`:
    returns that count. While Redis cannot be reached (a restart), try again
    for up to `patience` seconds: the call has ended, and its result is all
    that is left of it. Only the reporter whose end the ledger took publishes
    (docs/architecture.md, "One end per call")."""
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
            if stage is not None:
                pipe.hincrby(stages_key(batch_id), str(stage), 1)
                pipe.expire(stages_key(batch_id), TTL_SECONDS)
            done = pipe.execute()
    return int(done[3]) if stage is not None else None


def announce(client: redis.Redis, batch_id: str, notice: ToolResult, *,
             reply_to: str | None) -> None:  # fmt: skip
    """A notice (a call waiting for approval) to the batch's client; not stored."""
    payload = notice.model_dump_json()
    client.publish(reply_to or results_key(batch_id),
                   f"{batch_id}\n{payload}" if reply_to else payload)  # fmt: skip


def mark_sent(client: redis.Redis, batch_id: str, call_ids: list[str], *,
              again: bool = False) -> list[str]:  # fmt: skip
    """Mark calls sent now; those this call marked (`again`: every one)."""
    if not call_ids:
        return []
    now = str(time.time())
    with client.pipeline(transaction=False) as pipe:
        for call_id in call_ids:
            (pipe.hset if again else pipe.hsetnx)(sent_key(batch_id), call_id, now)
        pipe.expire(sent_key(batch_id), TTL_SECONDS)
        marked = pipe.execute()[:-1]
    return [call_id for call_id, new in zip(call_ids, marked, strict=True) if again or new]


def sent(client: redis.Redis, batch_id: str) -> dict[str, float]:
    return {k.decode(): float(v) for k, v in client.hgetall(sent_key(batch_id)).items()}


def started(client: redis.Redis, batch_id: str) -> set[str]:
    return {key.decode() for key in client.hkeys(deliveries_key(batch_id))}


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
