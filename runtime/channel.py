"""The results channel: how a worker hands a finished call back to its batch.

A worker stores the result in the batch's Redis hash and publishes it on the
batch's pub/sub channel in one pipelined round trip. The client subscribes
before it sends anything, so it never misses a result, and reads the hash when
it wants to be sure (a dropped connection loses pub/sub messages, not keys).
Celery's `GroupResult.get()` polls; this does not.
"""

from __future__ import annotations

import logging
import time

import redis
import tenacity

from runtime.types import ToolResult

log = logging.getLogger("toolrun.channel")
TTL_SECONDS = 24 * 3600
SWEEP_SECONDS = 1.0  # how often a listener also reads the results hash
RECONNECT_SECONDS = 0.5  # the pause before subscribing again after a lost connection
LOST = (redis.ConnectionError, redis.TimeoutError)


def key(batch_id: str) -> str:
    return f"toolrun:batch:{batch_id}:results"


def publish(
    client: redis.Redis, batch_id: str, result: ToolResult, *, patience: float = 0.0
) -> str:
    """Store and announce `result`; returns its JSON. While Redis cannot be
    reached (a restart), try again for up to `patience` seconds: the call has
    ended, and its result is all that is left of it. Publishing twice is
    harmless (the hash keeps one value; a batch takes one result per call)."""
    payload = result.model_dump_json()
    for attempt in tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(LOST),
        stop=tenacity.stop_after_delay(patience),
        wait=tenacity.wait_random_exponential(multiplier=0.1, max=2),
        reraise=True,
    ):
        with attempt, client.pipeline(transaction=False) as pipe:
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


class Listener:
    """A batch's side of the channel: the results of its calls as they are
    published, also across a dropped connection or a Redis restart.

    It subscribes before anything is sent. When the connection drops it
    subscribes again, then reads the hash, where a result published meanwhile
    waits (Redis with its append-only file keeps it over a restart; a Redis
    without loses it, and the batch's deadline ends that call). A lost
    connection is never raised: the batch's deadline bounds the wait.
    """

    def __init__(self, client: redis.Redis, batch_id: str) -> None:
        self.client, self.batch_id = client, batch_id
        self.cancelled = False
        self._pubsub: redis.client.PubSub | None = None
        self._sweep_at = 0.0
        self.subscribe()

    def subscribe(self) -> bool:
        """Subscribe now if not subscribed; False if Redis cannot be reached."""
        if self._pubsub is not None:
            return True
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(key(self.batch_id))
        except LOST as error:
            pubsub.close()
            log.warning("batch %s: results channel unreachable: %s", self.batch_id, error)
            return False
        self._pubsub, self._sweep_at = pubsub, 0.0  # read the hash at once: a gap just closed
        return True

    def results(self, waiting: set[str], timeout: float) -> list[ToolResult]:
        """Results of `waiting` calls that arrive within about `timeout`
        seconds; sets `cancelled` if the batch is cancelled meanwhile."""
        started = time.monotonic()
        try:
            if not self.subscribe():
                time.sleep(min(timeout, RECONNECT_SECONDS))
                return []
            found = []
            message = self._pubsub.get_message(timeout=timeout)
            if message and message["data"] == CANCEL.encode():
                self.cancelled = True
            elif message and message["type"] == "message":
                found.append(ToolResult.model_validate_json(message["data"]))
            if time.monotonic() >= self._sweep_at:
                self._sweep_at = time.monotonic() + SWEEP_SECONDS
                found += stored(self.client, self.batch_id, sorted(waiting))
            return [result for result in found if result.call_id in waiting]
        except LOST as error:
            log.warning("batch %s: results channel lost, subscribing again: %s",
                        self.batch_id, error)  # fmt: skip
            self.close()
            time.sleep(max(0.0, min(timeout - (time.monotonic() - started), RECONNECT_SECONDS)))
            return []

    def close(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            try:
                pubsub.close()
            except LOST:
                pass
