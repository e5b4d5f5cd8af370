"""Calls no pool process ended, ended from the worker's main process: one
whose process was killed at its hard limit or died, and one whose message the
broker gave up on (docs/architecture.md, "One end per call"). Each end goes
through the ledger's compare-and-set, so an end recorded before stands."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from runtime.errors import StateUnavailable
from runtime.execution import time_limits
from runtime.results import endings
from runtime.transport import signing
from runtime.types import CallMessage

if TYPE_CHECKING:
    from runtime.worker.worker import Worker

log = logging.getLogger("toolrun.worker")


def end_killed(
    worker: Worker, raw: Any, limit: float, *, name: str | None = None, lost: bool = False
) -> None:
    """From the worker's main process: the end of a call whose pool process
    was killed at its hard limit (or, `lost`, died of something else), once
    that process and the sessions it started are gone, recorded through the
    ledger's compare-and-set. A result the process published before it was
    killed stands; a message that never ran a tool (unsigned) is left alone,
    and so is a lost read or idempotent call: it is delivered again and
    runs again."""
    message = CallMessage.from_wire(raw)
    if message is None or not signing.genuine(message, worker.key):
        return
    try:
        published = worker.state.recall(message.batch_id, message.call_id)
    except StateUnavailable:
        published = None
    if published is not None:
        return
    read = time_limits.is_read(message.tool, worker.registry)
    if lost:
        spec = worker.registry.get(message.tool)
        if spec is None or read or spec.idempotent:
            return
        result = endings.process_lost(message.call_id, message.tool, worker=name or worker.name)
        log.error("the process running %s was lost", message.tool)
    else:
        result = time_limits.killed(
            message.call_id, message.tool, limit, read=read, worker=name or worker.name
        )
        log.error("%s ran past its hard limit of %g s; its process was killed", message.tool, limit)
    ended: list[bool] = []
    worker.ledger.eventually(
        lambda: ended.append(worker.ledger.record_result(message.batch_id, result))
    )
    try:
        worker.state.release(message.batch_id, message.call_id)
    except StateUnavailable:  # it lapses; the sweep finds the call ended
        pass
    try:
        worker.finish(message, result, ended[0] if ended else None)
    except StateUnavailable as error:  # the sweep ends it at the deadline; its row is kept
        log.error("the end of %s could not be published: %s", message.call_id, error)


def end_dead_letter(worker: Worker, raw: Any) -> None:
    """From the sweep: the end of a call whose message the broker gave up
    on (RabbitMQ's delivery limit; `runtime/transport/broker.py`), through
    the ledger's compare-and-set, so an end recorded before stands. A
    claimed call under a lease is its holder's to end (or the sweep's,
    once the lease lapses): a worker that lost only its channel may still
    run it. Raises while the ledger or the state is away: the message
    stays dead-lettered for the next sweep."""
    message = CallMessage.from_wire(raw)
    if message is None or not signing.genuine(message, worker.key):
        log.error("a dead-lettered message that names no signed call was dropped")
        return
    claimed = time_limits.is_claimed(message.tool, worker.registry)
    if claimed and worker.state.holds(message.batch_id, [message.call_id]):
        return
    limit = worker.settings.delivery_limit or worker.settings.max_deliveries
    result = endings.dead_lettered(message.call_id, message.tool, limit, claimed=claimed)
    ended = worker.ledger.record_result(message.batch_id, result)
    if ended:
        log.error("batch %s: %s was dead-lettered", message.batch_id, message.call_id)
    worker.finish(message, result, ended)
