"""Round trips to a real Redis, counted: a connection class that counts what
it sends (a pipeline is one send), and a `RedisState` on a private
redis-server that uses it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from runtime.settings import Settings
from runtime.stack.processes import stop_process
from runtime.stack.redis_server import redis_needles, start_redis
from runtime.transport.redis_state import RedisState


class Counting(redis.Connection):
    """A real connection that counts its round trips (a pipeline is one)."""

    sends = 0

    def send_packed_command(self, command, check_health=True):
        Counting.sends += 1
        return super().send_packed_command(command, check_health)


def round_trips(work: Callable[[], object]) -> tuple[object, int]:
    """What `work` returned, and the round trips it made on `Counting` connections."""
    before = Counting.sends
    done = work()
    return done, Counting.sends - before


@contextmanager
def counted_state(home: Path) -> Iterator[RedisState]:
    """A `RedisState` on a redis-server of its own under `home`, counting."""
    url, pid = start_redis(Settings(home=home))
    pool = redis.ConnectionPool.from_url(url, connection_class=Counting)
    found = RedisState(redis.Redis(connection_pool=pool))
    found.client.ping()
    try:
        yield found
    finally:
        found.close()
        stop_process(pid, needles=redis_needles(url))
