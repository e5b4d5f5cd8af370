"""The Celery app, built from settings: the one clients send with and workers
run (`workers/app.py` adds the worker's own signal handlers).

Celery is the transport, not the design: the task in `workers/tasks.py` is a
thin adapter around `runtime/execution/executor.py` (docs/architecture.md).
"""

from __future__ import annotations

from celery import Celery
from celery.app.amqp import AMQP

from runtime import config
from runtime.keyspace.names import READS
from runtime.settings import Settings
from runtime.transport import broker


class ShadowNamedEvents(AMQP):
    """Celery names a task's `task-sent` event after the task (`toolrun.execute`)
    and the worker's events after its shadow (`toolrun.<tool>`). Events reach
    Flower out of order, and a late `task-sent` renamed the call there; name
    that event after the shadow too, so Flower and /metrics only ever show tools."""

    def as_task_v2(self, *args, **kwargs):
        message = super().as_task_v2(*args, **kwargs)
        shadow = message.headers.get("shadow")
        if shadow and message.sent_event is not None:
            message.sent_event["name"] = shadow
        return message


def make_app(settings: Settings, *, redis_url: str | None = None) -> Celery:
    """The app of a deployment with `settings` (the worker's composition root
    reads them from the environment; a client passes its `Runtime`'s).
    `redis_url`: the state's Redis (else the settings'), which keeps Celery's
    results; the broker is `TOOLRUN_BROKER_URL`, by default that same Redis."""
    state_url = redis_url or config.redis_url(settings, required=False) or config.DEFAULT_REDIS
    broker_url = config.broker_url(settings, state_url=state_url)
    app = Celery(
        "toolrun",
        broker=broker_url,
        backend=state_url,
        include=["workers.tasks"],
        amqp=ShadowNamedEvents,
    )
    app.conf.update(
        # JSON only: pickle lets anyone who can write to Redis run code.
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        # Results travel on toolrun's own pub/sub channel; the backend keeps none.
        task_ignore_result=True,
        # Flower sees only live events.
        worker_send_task_events=True,
        task_send_sent_event=True,
        # A message is acknowledged only once its call has ended, so a lost worker's
        # calls are delivered again (reads re-run; claimed effects are not re-run).
        task_acks_late=True,
        # A prefork child that dies mid-call requeues its message instead of acking it.
        task_reject_on_worker_lost=True,
        # Pool processes are replaced after this many calls or this much memory, so a
        # leak or a fragmented heap is left behind (prefork; other pools ignore them).
        worker_max_tasks_per_child=settings.max_tasks_per_child,
        worker_max_memory_per_child=settings.max_memory_per_child_mib * 1024,  # KiB
        # One message at a time per slot, so ordered steps are not hoarded by one worker.
        worker_prefetch_multiplier=1,
        # Celery's own result keys (none are kept: results use toolrun's channel) expire.
        result_expires=24 * 3600,
        broker_connection_retry_on_startup=True,
        task_default_queue=READS,
        # A tool's print() goes through logging, so the redacting filter sees it.
        worker_redirect_stdouts=True,
        worker_redirect_stdouts_level="INFO",
        # Per kind of broker: Redis's visibility timeout, RabbitMQ's quorum queues, Sentinel.
        **broker.options(settings, broker_url, state_url=state_url),
    )
    return app
