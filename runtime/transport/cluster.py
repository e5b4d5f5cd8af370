"""The transport of a real deployment: task messages to Celery workers on
Redis, results back on the client's pub/sub channel (one subscription per
process, `transport/listener.py`), cancel flags and approvals' doorbell in Redis."""

from __future__ import annotations

import logging

import redis
from celery import Celery

from runtime.gate.policy import Policy
from runtime.transport import channel
from runtime.transport.base import Inbox, Sender
from runtime.transport.listener import Listener
from runtime.transport.names import cancel_key
from runtime.transport.outbox import Outbox
from runtime.types import Batch

log = logging.getLogger("toolrun.transport")


class CeleryTransport(channel.RedisDoorbell):
    def __init__(self, app: Celery, client: redis.Redis, key: bytes) -> None:
        super().__init__(client)
        self.app, self.key = app, key
        self.listener = Listener(client)

    def sender(self, batch: Batch, policy: Policy) -> Sender:
        return Outbox(self.app, self.key, batch, policy, reply_to=self.listener.channel)

    def watch(self, batch_id: str) -> Inbox:
        return self.listener.watch(batch_id)

    def unwatch(self, batch_id: str) -> None:
        self.listener.unwatch(batch_id)

    def cancelled(self, batch_id: str) -> bool:
        try:
            return bool(self.client.exists(cancel_key(batch_id)))
        except channel.LOST as error:  # Redis down: nobody can have cancelled through it
            log.warning("batch %s: cannot read its cancel flag: %s", batch_id, error)
            return False

    def cancel(self, batch_id: str, *, by: str) -> None:
        channel.cancel(self.client, batch_id, by=by)

    def close(self) -> None:
        self.listener.close()
        self.client.close()
