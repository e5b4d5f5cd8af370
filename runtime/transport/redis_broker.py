"""Celery's broker on Redis: kombu's transport, taking several messages per
round trip (docs/architecture.md, "Brokers").

kombu's Redis channel takes one message per BRPOP, then stores its unacked
copy (restored if the worker is lost) in a second round trip: a worker handed
sixteen calls at once spent thirty-two round trips, and as many turns of its
event loop, before the last one started. Here the blocking pop is BLMPOP
(Redis 7), which brings as many messages as the worker's prefetch has room
for, and their copies are stored together in one transaction, as kombu would
store each: a worker handed sixteen calls spends two round trips, one handed
one call the same two as before. They are delivered in order, as if each had
come by its own BRPOP; if delivering one fails, those after it go back to
the head of the queue at once. A Redis without BLMPOP (before 7.0) gets
kombu's own BRPOP. The synchronous client, which kombu builds anew for every
ack and every copy, is kept.

`redis://` and `rediss://` use it (TLS is the app's `broker_use_ssl`,
`runtime.transport.broker`). Sentinel takes kombu's own channel, keeping its
pool once closed as this one does (`KeepsPool`).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from queue import Empty
from typing import Any

import redis as redis_py
from kombu.transport import redis, virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads

log = logging.getLogger("toolrun.broker")

# At most this many messages per pop, whatever the prefetch allows.
MOST = 64


class QoS(redis.QoS):
    """kombu's, except that a message whose unacked copy was stored as it was
    taken is not stored again."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stored: set[str] = set()

    def append(self, message: Any, delivery_tag: str) -> None:
        if delivery_tag in self.stored:
            self.stored.discard(delivery_tag)
            virtual.QoS.append(self, message, delivery_tag)
        else:
            super().append(message, delivery_tag)


class KeepsPool:
    """A channel that keeps its connection pool once closed. A channel closed
    under a lost connection (Redis restarted, or Sentinel's master lost) still
    restores its unacked messages and acks those its worker finishes later,
    after kombu has cut it loose from the connection that knew the address:
    kombu's own then builds a new pool from that connection and fails with an
    AttributeError, which Celery takes for an unrecoverable error, and the
    worker stops with the calls it runs (docs/architecture.md, "Brokers").
    Here it takes the pool it had: redis-py's pools reconnect on use, and
    Sentinel's asks the sentinels where the master is now."""

    _pool: Any
    _kept_pool: Any = None

    def _disconnect_pools(self) -> None:
        self._kept_pool = self._pool or self._kept_pool
        super()._disconnect_pools()  # type: ignore[misc]

    def _get_pool(self, asynchronous: bool = False) -> Any:
        transport = self.connection  # type: ignore[attr-defined]
        if transport is None or transport.client is None:
            if asynchronous or self._kept_pool is None:
                raise redis_py.ConnectionError("the broker channel is closed")
            return self._kept_pool
        return super()._get_pool(asynchronous=asynchronous)  # type: ignore[misc]


class SentinelChannel(KeepsPool, redis.SentinelChannel):
    """kombu's Sentinel channel, keeping its pool once closed."""


class SentinelTransport(redis.SentinelTransport):
    Channel = SentinelChannel


class Channel(KeepsPool, redis.Channel):
    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._kept: Any = None
        self._popping = 0  # the COUNT of the BLMPOP sent, while its reply is awaited
        self._several = True  # False once Redis refused BLMPOP: kombu's BRPOP from then on
        super().__init__(*args, **kwargs)

    @contextmanager
    def conn_or_acquire(self, client: Any = None):
        """One synchronous client for the channel's pool, not one per command."""
        if client:
            yield client
            return
        pool = self.pool
        if self._kept is None or self._kept.connection_pool is not pool:
            self._kept = self._create_client()
        yield self._kept

    def _room(self) -> int:
        if not (self._several and self.ack_emulation) or self.global_keyprefix:
            return 0
        return min(MOST, self.qos.can_consume_max_estimate() or 0)

    def _brpop_start(self, timeout: float | None = None) -> None:
        room = self._room()
        if room <= 1:
            self._popping = 0  # what comes back is BRPOP's
            return super()._brpop_start(timeout)
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            return None
        # BRPOP's keys and order: by priority, then queue
        keys = [self._q_for_pri(queue, pri) for pri in self.priority_steps for queue in queues]
        wait = self.brpop_timeout if timeout is None else timeout
        self._in_poll = self.client.connection
        self._brpop_sent_at = time.monotonic()
        self._popping = room
        command = ["BLMPOP", wait or 0, len(keys), *keys, "RIGHT", "COUNT", room]
        self.client.connection.send_command(*command)
        return None

    def _brpop_read(self, **options: Any) -> bool:
        if not self._popping:
            return super()._brpop_read(**options)
        self._popping = 0
        try:
            try:
                reply = self.client.parse_response(self.client.connection, "BLMPOP", **options)
            except redis_py.ResponseError as error:  # a Redis before 7.0: kombu's BRPOP
                log.warning("Redis refused BLMPOP, one message per BRPOP from now: %s", error)
                self._several = False
                raise Empty() from error
            except self.connection_errors:
                self.client.connection.disconnect()  # the next turn reconnects, as kombu's
                raise
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()
        if not reply:
            raise Empty()
        key, items = reply
        queue = bytes_to_str(key).rsplit(self.sep, 1)[0]
        self._queue_cycle.rotate(queue)
        payloads = [loads(bytes_to_str(item)) for item in items]
        if len(payloads) > 1:
            self._store(key, items, payloads)
        for index, payload in enumerate(payloads):
            try:
                self.connection._deliver(payload, queue)
            except BaseException:
                self._give_back(payloads[index + 1 :])
                raise
        return True

    def _poll_error(self, type: str, **options: Any) -> None:
        """kombu reads the reply of a pop that met an error and drops it:
        what a BLMPOP had taken goes back to the head of its queue. The pop
        is over then, as after `_brpop_read`: left in poll, the channel
        started no other, and its close waited for ever for a second reply."""
        if type != "BRPOP" or not self._popping:
            return super()._poll_error(type, **options)
        self._popping = 0
        try:
            reply = self.client.parse_response(self.client.connection, "BLMPOP")
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()
        if reply:
            key, items = reply
            with self.conn_or_acquire() as client:
                client.rpush(key, *reversed(items))
        return None

    def _store(self, key: bytes, items: list[bytes], payloads: list[dict]) -> None:
        """The unacked copies of messages taken together, in one transaction,
        as kombu's `QoS.append` stores each: [payload, exchange, routing key]."""
        now, copies = time.time(), {}
        for payload in payloads:
            try:
                info = payload["properties"]["delivery_info"]
                tag = payload["properties"]["delivery_tag"]
                copies[tag] = dumps([payload, info["exchange"], info["routing_key"]])
            except (KeyError, TypeError):  # no kombu message: it fails as it would in kombu
                continue
        if not copies:
            return
        try:
            with self.conn_or_acquire() as client, client.pipeline() as pipe:
                pipe.zadd(self.unacked_index_key, dict.fromkeys(copies, now))
                pipe.hset(self.unacked_key, mapping=copies)
                pipe.execute()
        except BaseException:
            try:  # not stored: back where they were, first in line again
                with self.conn_or_acquire() as client:
                    client.rpush(key, *reversed(items))
            except (redis_py.RedisError, *self.connection_errors) as error:
                log.error(
                    "%d messages taken could not be stored or put back: %s", len(items), error
                )
            raise
        self.qos.stored.update(copies)

    def _give_back(self, payloads: list[dict]) -> None:
        """Messages taken but not delivered go back to their queue at once, the
        first of them next in line, rather than after the visibility timeout."""
        for payload in reversed(payloads):
            tag = payload.get("properties", {}).get("delivery_tag")
            if tag in self.qos.stored:
                self.qos.stored.discard(tag)
                self.qos.restore_by_tag(tag)


class Transport(redis.Transport):
    Channel = Channel


NAME = f"{__name__}:Transport"
SENTINEL = f"{__name__}:SentinelTransport"
