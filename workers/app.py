"""The Celery app, built from settings. `celery -A workers worker` finds it here.

Celery is the transport, not the design: the tasks in `workers/tasks.py` are
thin adapters around `runtime/executor.py`.
"""

from __future__ import annotations

from celery import Celery, signals

from runtime.logs import redact_handlers
from runtime.settings import Settings, get_settings
from runtime.stack_record import redis_url_for

READS_QUEUE = "reads"
EFFECTS_QUEUE = "effects"


def make_app(settings: Settings | None = None, *, redis_url: str | None = None) -> Celery:
    settings = settings or get_settings()
    url = redis_url or redis_url_for(settings, required=False) or "redis://127.0.0.1:6379/0"
    app = Celery("toolrun", broker=url, backend=url, include=["workers.tasks"])
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
        # An effect message is taken off the queue only once its call has ended.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # One message at a time per slot, so ordered steps are not hoarded.
        worker_prefetch_multiplier=1,
        # Longer than any tool timeout, or a running task is delivered twice.
        broker_transport_options={"visibility_timeout": 3600},
        broker_connection_retry_on_startup=True,
        task_default_queue=READS_QUEUE,
        # A tool's print() goes through logging, so the redacting filter sees it.
        worker_redirect_stdouts=True,
        worker_redirect_stdouts_level="INFO",
    )
    return app


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _redact_worker_logs(logger, **_: object) -> None:
    """Worker logs leave the worker: redact them at every handler."""
    redact_handlers(logger)
