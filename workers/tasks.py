"""Thin Celery adapters: decode the message, call the executor, publish the
result. All logic lives in `runtime/`; results travel on toolrun's own
channel, so the task returns nothing (Celery would discard it)."""

from __future__ import annotations

import logging
import os

import redis

from runtime.execution import executor
from runtime.ledger.store import Ledger
from runtime.registry.loading import load_tools
from runtime.settings import get_settings
from runtime.stack.record import redis_url_for, signing_key_for
from runtime.transport import channel, outbox
from runtime.transport.names import TASK
from workers import app

log = logging.getLogger("toolrun.worker")
settings = get_settings()
registry = load_tools(settings.module_names)  # once per process, never per task
key = signing_key_for(settings)  # no key, no worker: it would run nothing anyway
_resources: dict[int, tuple[Ledger, redis.Redis]] = {}
PUBLISH_PATIENCE = 30.0  # seconds a finished call's result waits for Redis to come back


def _resources_here() -> tuple[Ledger, redis.Redis]:
    """One ledger engine and one Redis pool per process: prefork children must
    not share the parent's connections."""
    pid = os.getpid()
    if pid not in _resources:
        url = redis_url_for(settings, required=False) or app.conf.broker_url
        _resources[pid] = (Ledger.from_settings(settings, lazy=True), redis.Redis.from_url(url))
    return _resources[pid]


@app.task(name=TASK, bind=True)
def execute_call(self, message: dict) -> None:
    ledger, client = _resources_here()
    board = channel.Board(client)
    result = executor.execute(
        message,
        registry=registry,
        ledger=ledger,
        settings=settings,
        key=key,
        worker=self.request.hostname,
        board=board,
    )
    if result is None:  # too malformed to name a call: nobody to answer
        return
    batch_id = message["batch_id"]
    channel.publish(client, batch_id, result, reply_to=message.get("reply_to"),
                    patience=PUBLISH_PATIENCE)  # fmt: skip
    outbox.forward(self.app, client, ledger, message, result)
