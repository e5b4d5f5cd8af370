"""The transport of a real deployment: task messages to Celery workers on
Redis, results stored in each batch's hash and announced on the submitting
client's channel (one subscription per process, `transport/listener.py`),
the marks of what was sent and taken, and cancel flags, in Redis."""

from __future__ import annotations

import json
import logging
from typing import Any

import redis
from celery import Celery

from runtime.transport import channel
from runtime.transport.base import Inbox
from runtime.transport.listener import Listener
from runtime.transport.names import TTL_SECONDS, cancel_key, plan_key, results_key
from runtime.transport.outbox import post
from runtime.types import ToolResult

log = logging.getLogger("toolrun.transport")


class CeleryTransport:
    def __init__(self, app: Celery, client: redis.Redis) -> None:
        self.app, self.client = app, client
        self.listener = Listener(client)

    @property
    def reply_to(self) -> str:
        """This process's results channel."""
        return self.listener.channel

    def post(self, messages: list[dict[str, Any]], *, parallel: bool, chained: bool = False
             ) -> bool:  # fmt: skip
        return post(self.app, messages, parallel=parallel, chained=chained)

    def publish(self, batch_id: str, result: ToolResult, *, reply_to: str | None) -> None:
        channel.publish(self.client, batch_id, result, reply_to=reply_to)

    def announce(self, batch_id: str, notice: ToolResult, *, reply_to: str | None) -> None:
        channel.announce(self.client, batch_id, notice, reply_to=reply_to)

    def mark_sent(self, batch_id: str, call_ids: list[str], *, again: bool = False) -> list[str]:
        return channel.mark_sent(self.client, batch_id, call_ids, again=again)

    def sent(self, batch_id: str) -> dict[str, float]:
        return channel.sent(self.client, batch_id)

    def started(self, batch_id: str) -> set[str]:
        return channel.started(self.client, batch_id)

    def keep_plan(self, batch_id: str, plan: dict[str, Any]) -> None:
        self.client.set(plan_key(batch_id), json.dumps(plan), ex=TTL_SECONDS)

    def plan(self, batch_id: str) -> dict[str, Any] | None:
        stored = self.client.get(plan_key(batch_id))
        return json.loads(stored) if stored else None

    def ends(self, batch_id: str) -> dict[str, ToolResult]:
        stored = self.client.hgetall(results_key(batch_id))
        return {k.decode(): ToolResult.model_validate_json(v) for k, v in stored.items()}

    def watch(self, batch_id: str) -> Inbox:
        return self.listener.watch(batch_id)

    def unwatch(self, batch_id: str) -> None:
        self.listener.unwatch(batch_id)

    def cancelled(self, batch_id: str) -> bool:
        try:
            return bool(self.client.exists(cancel_key(batch_id)))
        except channel.LOST as error:  # Redis down: the ledger's cancel still counts
            log.warning("batch %s: cannot read its cancel flag: %s", batch_id, error)
            return False

    def cancel(self, batch_id: str, *, by: str) -> None:
        channel.cancel(self.client, batch_id, by=by)

    def close(self) -> None:
        self.listener.close()
        self.client.close()
