"""The Celery app, built from settings. `celery -A workers worker` finds it here.

Celery is the transport, not the design: the tasks in `workers/tasks.py` are
thin adapters around `runtime/execution/executor.py`.
"""

from __future__ import annotations

import gc
import sys
from contextvars import Token

from celery import Celery, signals
from celery.app.amqp import AMQP

from runtime.logs import enter_call, leave_call, prepare_handlers
from runtime.settings import Settings, get_settings
from runtime.stack.record import redis_url_for

READS_QUEUE = "reads"
EFFECTS_QUEUE = "effects"
_calls: dict[str, Token] = {}  # task id -> its log context, from prerun to postrun


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


def make_app(settings: Settings | None = None, *, redis_url: str | None = None) -> Celery:
    settings = settings or get_settings()
    url = redis_url or redis_url_for(settings, required=False) or "redis://127.0.0.1:6379/0"
    app = Celery(
        "toolrun", broker=url, backend=url, include=["workers.tasks"], amqp=ShadowNamedEvents
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
        # Redis redelivers an unacked message after this; it must outlast any tool's
        # timeout or a call still running is delivered twice.
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout,
            # kombu looks for messages past that timeout only every interval x
            # throttle seconds (10 x 10 by default): a lost worker's calls would
            # wait up to 100 s more. Look every few seconds, on every sweep.
            "unacked_restore_interval": min(10.0, max(1.0, settings.visibility_timeout / 3)),
            "unacked_restore_throttle": 1,
        },
        # Celery's own result keys (none are kept: results use toolrun's channel) expire.
        result_expires=24 * 3600,
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
    """Worker logs leave the worker: redact them at every handler, name the
    call each line is about, and write TOOLRUN_LOG_FORMAT (json: one object a line)."""
    prepare_handlers(logger, get_settings().log_format)


@signals.celeryd_init.connect
def _no_banner_in_json_logs(instance=None, **_: object) -> None:
    """The startup banner is printed, not logged: a JSON log goes without it."""
    if instance is not None and get_settings().log_format == "json":
        instance.quiet = True


@signals.worker_init.connect
def _share_memory_with_pool_processes(**_: object) -> None:
    """Pool processes are forked from this one: objects the collector never
    visits stay on pages the children share, instead of each child copying
    them (the tool registry, pydantic models, SQLAlchemy)."""
    gc.collect()
    gc.freeze()


@signals.task_prerun.connect
def _enter_call(task_id: str, task, args=(), **_: object) -> None:
    """From here to task_postrun (Celery's own "succeeded" line included), every
    log line of this task names its batch and call."""
    message = args[0] if args else None
    if isinstance(message, dict) and "batch_id" in message:
        _calls[task_id] = enter_call(str(message["batch_id"]), message.get("call_id"))


@signals.task_postrun.connect
def _leave_call(task_id: str, **_: object) -> None:
    token = _calls.pop(task_id, None)
    if token is not None:
        leave_call(token)


def _guard_flower_metrics() -> None:
    """Flower 2 serves /metrics without asking for credentials even when basic
    auth is on; the metrics name every worker and tool, so ask there too
    (Prometheus scrapes with `basic_auth`). Flower imports with every `celery`
    command (an entry-point plugin), before it loads this app."""
    monitor = sys.modules.get("flower.views.monitor")
    metrics = getattr(monitor, "Metrics", None)
    if metrics is None or getattr(metrics, "_toolrun_guarded", False):
        return

    def prepare(handler) -> None:
        if handler.application.options.basic_auth:
            handler.current_user  # noqa: B018 - reading it checks the credentials, 401 if wrong

    metrics.prepare, metrics._toolrun_guarded = prepare, True


_guard_flower_metrics()
