"""Thin Celery adapters: decode the message, call the executor, publish and
return the result's JSON. All logic lives in `runtime/`."""

from __future__ import annotations

import logging
import os

import redis
from runtime.registry.loading import load_tools

from runtime.execution import executor, time_limits
from runtime.ledger.store import Ledger
from runtime.results import formatter as results
from runtime.settings import get_settings
from runtime.stack.record import redis_url_for, signing_key_for
from runtime.transport import channel, outbox
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
    """From the worker's main process: the end of a call whose pool process was
    killed at its hard limit (`runtime.time_limits.end_killed`)."""
    ledger, client = _resources_here()
    time_limits.end_killed(message, limit, worker=worker, registry=registry, key=key,
                           ledger=ledger, client=client, app=app)  # fmt: skip
