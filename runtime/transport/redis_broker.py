"""Celery's broker on Redis: kombu's transport, taking several messages per
round trip (docs/architecture.md, "Brokers").

kombu's Redis channel takes one message per BRPOP, then stores its unacked
copy (restored if the worker is lost) in a second round trip: a worker handed
sixteen calls at once spends thirty-two round trips, and as many turns of its
event loop, before the last one starts. Here, once a BRPOP has brought one
message, one script takes as many more as the worker's prefetch has room for
and stores their unacked copies in the same step, as kombu would: a message
is never out of the queue without its copy. They are then delivered in order,
as if each had come by its own BRPOP. The synchronous client, which kombu
builds anew for every ack and every copy, is kept.

Only `redis://` and `rediss://` use it; Sentinel keeps kombu's own.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Any

import redis as redis_py
from kombu.transport import redis, virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

log = logging.getLogger("toolrun.broker")

# At most this many more messages per BRPOP, whatever the prefetch allows.
MOST = 64

# KEYS: the unacked hash, its index, then the lists in BRPOP's order.
# ARGV: how many to take at most, the time of taking (the index's score).
# Each message's unacked copy is what kombu's QoS.append stores:
# [payload, exchange, routing key], the payload spliced in as it was read.
# Returns list, payload, list, payload...; a message that is not kombu's goes
# back where it was and ends the taking (kombu's own path then meets it).
TAKE = """
local most, now, taken = tonumber(ARGV[1]), ARGV[2], {}
for i = 3, #KEYS do
  while #taken < 2 * most do
    local item = redis.call('RPOP', KEYS[i])
    if not item then break end
    local ok, payload = pcall(cjson.decode, item)
    local properties = ok and type(payload) == 'table' and payload['properties']
    local tag = type(properties) == 'table' and properties['delivery_tag']
    if type(tag) ~= 'string' then
      redis.call('RPUSH', KEYS[i], item)
      return taken
    end
    local info = properties['delivery_info']
    if type(info) ~= 'table' then info = {} end
    local copy = '[' .. item .. ',' .. cjson.encode(info['exchange'] or '') .. ','
      .. cjson.encode(info['routing_key'] or '') .. ']'
    redis.call('ZADD', KEYS[2], now, tag)
    redis.call('HSET', KEYS[1], tag, copy)
    taken[#taken + 1] = KEYS[i]
    taken[#taken + 1] = item
  end
end
return taken
"""


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


class Channel(redis.Channel):
    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._kept: Any = None
        self._take: Any = None
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

    def _brpop_read(self, **options: Any) -> bool:
        found = super()._brpop_read(**options)
        if found:
            self._take_more()
        return found

    def _take_more(self) -> None:
        room = min(MOST, self.qos.can_consume_max_estimate() or 0)
        if room <= 0 or not self.ack_emulation or self.global_keyprefix:
            return
        queues = self._queue_cycle.consume(len(self.active_queues))
        lists = [self._q_for_pri(queue, pri) for pri in self.priority_steps for queue in queues]
        try:
            with self.conn_or_acquire() as client:
                if self._take is None:
                    self._take = client.register_script(TAKE)
                keys = [self.unacked_key, self.unacked_index_key, *dict.fromkeys(lists)]
                taken = self._take(keys=keys, args=[room, time.time()], client=client)
        except (redis_py.RedisError, *self.connection_errors) as error:
            # The message BRPOP brought is delivered; the next BRPOP takes the rest.
            log.warning("could not take more messages in one round trip: %s", error)
            return
        pending = [
            (bytes_to_str(key).rsplit(self.sep, 1)[0], loads(bytes_to_str(item)))
            for key, item in zip(taken[::2], taken[1::2], strict=True)
        ]
        for _, payload in pending:
            self.qos.stored.add(payload["properties"]["delivery_tag"])
        for index, (queue, payload) in enumerate(pending):
            try:
                self.connection._deliver(payload, queue)
            except BaseException:
                self._give_back(pending[index + 1 :])
                raise

    def _give_back(self, pending: list[tuple[str, dict]]) -> None:
        """Messages taken but not delivered go back to their queue at once, the
        first of them next in line, rather than after the visibility timeout."""
        for _, payload in reversed(pending):
            tag = payload["properties"]["delivery_tag"]
            self.qos.stored.discard(tag)
            self.qos.restore_by_tag(tag)


class Transport(redis.Transport):
    Channel = Channel


NAME = f"{__name__}:Transport"
