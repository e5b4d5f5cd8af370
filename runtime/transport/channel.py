"""Timings of the client's results subscription (`transport/listener.py`), and
the Redis errors that mean the connection was lost."""

import redis

LOST = (redis.ConnectionError, redis.TimeoutError)
SWEEP_SECONDS = 1.0  # how often a listener also reads the results hash
RECONNECT_SECONDS = 0.5  # the pause before subscribing again after a lost connection
