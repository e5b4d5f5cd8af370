"""Thin Celery adapters: decode the message, call the executor, and if this
delivery ended the call, announce its result and carry the batch on. All logic
lives in `runtime/`; results travel on toolrun's own channel, and what the task
returns is only what Flower shows of it."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass

import redis
from celery import signals

from runtime.batch.advance import Advancer
from runtime.execution import executor, time_limits
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import Ledger
from runtime.registry.loading import load_tools
from runtime.results.formatter import ledger_summary
from runtime.settings import get_settings
from runtime.stack.record import redis_url_for, signing_key_for
from runtime.transport import channel, outbox
from runtime.transport.cluster import CeleryTransport
from runtime.transport.names import EPOCH_KEY, SWEEP_LOCK, TASK
from runtime.types import ToolResult
from workers import app

log = logging.getLogger("toolrun.worker")
settings = get_settings()
registry = load_tools(settings.module_names,
                      mcp_servers_file=settings.mcp_servers_file)  # once per process, not per task
key = signing_key_for(settings)  # no key, no worker: it would run nothing anyway
PUBLISH_PATIENCE = 30.0  # seconds a finished call's result waits for Redis to come back
SWEEP_SECONDS = 1.0  # how often each worker offers to sweep
SWEEP_LOCK_SECONDS = 30  # the longest one sweep may hold the others off


@dataclass(frozen=True)
class Resources:
    ledger: Ledger
    client: redis.Redis
    advancer: Advancer


_resources: dict[int, Resources] = {}


def resources() -> Resources:
    """One ledger engine, one Redis pool and one advancer per process: prefork
    children must not share the parent's connections."""
    pid = os.getpid()
    if pid not in _resources:
        url = redis_url_for(settings, required=False) or app.conf.broker_url
        ledger, client = Ledger.from_settings(settings, lazy=True), redis.Redis.from_url(url)
        advancer = Advancer(ledger=ledger, registry=registry, key=key,
                            transport=CeleryTransport(app, client),
                            approvals=Approvals(ledger, key))  # fmt: skip
        _resources[pid] = Resources(ledger, client, advancer)
    return _resources[pid]


@app.task(name=TASK, bind=True, Request="workers.request:CallRequest")
def execute_call(self, message: dict) -> dict | None:
    here = resources()
    outcome = executor.execute(
        message,
        registry=registry,
        ledger=here.ledger,
        settings=settings,
        key=key,
        worker=self.request.hostname,
        board=channel.Board(here.client),
    )
    if outcome is None:  # too malformed to name a call: nobody to answer
        return None
    finish(here, message, outcome.result, outcome.ended)
    # Results travel on toolrun's channel and the backend keeps none; this value is
    # what Flower shows of the task (its task-succeeded event), redacted and short.
    return ledger_summary(outcome.result) | {
        "call_id": outcome.result.call_id,
        "status": outcome.result.status.value,
    }


def finish(here: Resources, message: dict, result: ToolResult, ended: bool | None) -> None:
    """After a call's end: if this delivery ended it (or may have: the ledger
    was down), announce it, hand its chain on, and carry the batch on when it
    ended its stage's last call. Someone else's end was announced by them."""
    if ended is False:
        return
    batch_id = message["batch_id"]
    done = channel.publish(here.client, batch_id, result, reply_to=message.get("reply_to"),
                           patience=PUBLISH_PATIENCE, stage=message.get("stage"))  # fmt: skip
    if outbox.forward(app, here.client, here.ledger, message, result):
        return  # the chain goes on: its next step's worker carries the batch on
    if done is not None and done >= message.get("stage_size", 1) and not message.get("last_stage"):
        try:
            here.advancer.advance(batch_id)
        except Exception:  # noqa: BLE001 - the sweep carries it on
            log.exception("batch %s: could not start its next stage", batch_id)


def hard_limit(message: object) -> float:
    """Seconds after which the pool process running `message` is killed."""
    return time_limits.hard_limit(message, registry, settings)


def end_killed(message: dict, limit: float, worker: str | None) -> None:
    """From the worker's main process: the end of a call whose pool process was
    killed at its hard limit (`runtime.execution.time_limits.end_killed`)."""
    here = resources()
    found = time_limits.end_killed(message, limit, worker=worker, registry=registry, key=key,
                                   ledger=here.ledger, client=here.client)  # fmt: skip
    if found is not None:
        try:
            finish(here, message, *found)
        except channel.LOST as error:  # the sweep ends it at the deadline; its row is recorded
            log.error("the end of %s could not be published: %s", message.get("call_id"), error)


@signals.worker_ready.connect
def _start_sweeping(**_: object) -> None:
    """Every worker offers to sweep; one at a time does (a Redis lock with a TTL)."""
    threading.Thread(target=_sweep_forever, name="toolrun-sweep", daemon=True).start()


def _sweep_forever() -> None:
    token = uuid.uuid4().hex
    while True:
        time.sleep(SWEEP_SECONDS)
        try:
            sweep_once(token)
        except Exception as error:  # noqa: BLE001 - Redis or the ledger away: next time
            log.warning("sweep failed: %s", error)


def sweep_once(token: str) -> bool:
    """Sweep if no other worker is sweeping; True if this one did. A missing
    epoch key means Redis lost what it held (a restart without its append-only
    file): every open batch is looked at, and what was lost is sent again."""
    here = resources()
    if not here.client.set(SWEEP_LOCK, token, nx=True, ex=SWEEP_LOCK_SECONDS):
        return False
    try:
        lost = here.client.set(EPOCH_KEY, token, nx=True)
        here.advancer.sweep(everything=bool(lost))
    finally:
        if here.client.get(SWEEP_LOCK) == token.encode():
            here.client.delete(SWEEP_LOCK)
    return True
