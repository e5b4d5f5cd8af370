"""The transport of a real deployment: task messages to Celery workers
(`outbox.CeleryQueue`), and the batch's shared state in Redis
(`redis_state.RedisState`): ends stored in each batch's hash and announced on
the submitting client's channel (one subscription per process,
`transport/listener.py`), the marks of what was sent and taken, cancel flags."""

from __future__ import annotations

import redis
from celery import Celery

from runtime.redaction import BUILT_IN, Redactor
from runtime.transport.outbox import CeleryQueue
from runtime.transport.redis_state import RedisState
from runtime.types import CallMessage


class CeleryTransport(RedisState):
    def __init__(self, app: Celery, client: redis.Redis, *, redactor: Redactor = BUILT_IN) -> None:
        super().__init__(client)
        self.app, self.queue = app, CeleryQueue(app, redactor=redactor)

    def post(self, messages: list[CallMessage], *, parallel: bool, chained: bool = False) -> bool:
        return self.queue.post(messages, parallel=parallel, chained=chained)
