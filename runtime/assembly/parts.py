"""The parts a client and a worker both build from the settings: the Celery
and Redis transport, and the `Advancer` that moves their batches on. Both
write them here, so a setting the advancer reads is passed in one place
(docs/architecture.md, "Assembly")."""

from __future__ import annotations

from celery import Celery

from runtime import config
from runtime.batch.advance import Advancer
from runtime.gate.notifiers import Notifier
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import Ledger
from runtime.redaction import Redactor
from runtime.registry.capabilities import Registry
from runtime.settings import Settings
from runtime.transport.app import make_app
from runtime.transport.base import BatchState, Queue
from runtime.transport.cluster import CeleryTransport
from runtime.transport.redis_client import client_state, state_client


def client_transport(settings: Settings, url: str, *, redactor: Redactor) -> CeleryTransport:
    """A client's: a Celery app of its own that only sends, and a bounded pool
    of connections to the state's Redis at `url` that its threads share."""
    app = make_app(settings, redis_url=url)
    return CeleryTransport(app, client_state(settings, url), redactor=redactor)


def worker_transport(settings: Settings, app: Celery, *, redactor: Redactor) -> CeleryTransport:
    """A worker process's, on the worker's Celery `app`: the state's Redis is
    the one the settings name, else the app's result backend."""
    url = config.redis_url(settings, required=False) or app.conf.result_backend
    return CeleryTransport(app, state_client(settings, url), redactor=redactor)


def advancer(
    settings: Settings,
    *,
    ledger: Ledger,
    registry: Registry,
    key: bytes,
    queue: Queue,
    state: BatchState,
    approvals: Approvals,
    notifiers: tuple[Notifier, ...],
) -> Advancer:
    """The batch mover of a client or a worker, with the lease, resend,
    unrecorded-batch and notification-resend timings of `settings`."""
    return Advancer(
        ledger=ledger,
        registry=registry,
        key=key,
        queue=queue,
        state=state,
        approvals=approvals,
        lease_seconds=settings.lease_seconds,
        resend_after=settings.resend_after,
        unrecorded_patience=settings.unrecorded_patience,
        notification_resend_after=settings.notification_resend_after,
        notifiers=notifiers,
    )
