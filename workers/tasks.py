"""Thin Celery adapters: decode the message, call the executor, publish and
return the result's JSON. All logic lives in `runtime/`."""

from __future__ import annotations

import logging
import os

import redis

from runtime import channel, executor, outbox, results, signing, time_limits
from runtime.ledger import Ledger
from runtime.registry import load_tools
from runtime.settings import get_settings
from runtime.stack_record import redis_url_for, signing_key_for
from runtime.types import Status
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


@app.task(name="toolrun.execute", bind=True, Request="workers.request:CallRequest")
def execute_call(self, message: dict) -> dict:
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
    if result is None:
        return {"status": Status.error.value, "error": "malformed call message"}
    batch_id = message["batch_id"]
    channel.publish(client, batch_id, result, reply_to=message.get("reply_to"),
                    patience=PUBLISH_PATIENCE)  # fmt: skip
    outbox.forward(self.app, client, ledger, message, result)
    return results.ledger_summary(result) | {"call_id": result.call_id, "status": result.status}


def hard_limit(message: object) -> float:
    """Seconds after which the pool process running `message` is killed."""
    return time_limits.hard_limit(message, registry, settings)


def end_killed(message: dict, limit: float, worker: str | None) -> None:
    """The end of a call whose pool process was killed at its hard limit, from
    the worker's main process: recorded, published, and its chain handed on
    (under `on_error="continue"`). A result the process published before it
    was killed stands."""
    if not signing.verify(message, key):  # an unsigned message never ran a tool
        return
    ledger, client = _resources_here()
    batch_id, call_id, tool = message["batch_id"], message["call_id"], message["tool"]
    try:
        result = channel.Board(client).recall(batch_id, call_id)
    except channel.LOST:
        result = None
    if result is None:
        read = time_limits.is_read(tool, registry)
        result = time_limits.killed(call_id, tool, limit, read=read, worker=worker)
        log.error("%s ran past its hard limit of %g s; its process was killed", tool, limit)
        ledger.eventually(lambda: ledger.record_result(batch_id, result))
    try:
        channel.publish(client, batch_id, result, reply_to=message.get("reply_to"),
                        patience=PUBLISH_PATIENCE)  # fmt: skip
    except channel.LOST as error:  # the client's deadline ends it; its row is recorded
        log.error("the end of %s could not be published: %s", call_id, error)
    outbox.forward(app, client, ledger, message, result)
