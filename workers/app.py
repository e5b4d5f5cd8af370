"""What a worker process adds to the Celery app (`runtime/transport/app.py`):
redacted, call-tagged logs, task events sent in bursts (`workers/events.py`),
and Flower's `/metrics` behind its basic auth.
`celery -A workers worker|flower` loads this module; clients never do.
"""

from __future__ import annotations

import sys
from contextvars import Token

from celery import Celery, signals

from runtime.logs import enter_call, leave_call, prepare_handlers
from runtime.redaction import redactor_for
from runtime.settings import Settings, get_settings
from runtime.transport import app as transport_app

__all__ = ["make_app"]
_calls: dict[str, Token] = {}  # task id -> its log context, from prerun to postrun


def make_app(settings: Settings, *, redis_url: str | None = None) -> Celery:
    """The deployment's app (`runtime.transport.app.make_app`), whose worker
    sends its task events in bursts."""
    app = transport_app.make_app(settings, redis_url=redis_url)
    app.conf.worker_consumer = "workers.events:CallConsumer"
    return app


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _redact_worker_logs(logger, **_: object) -> None:
    """Worker logs leave the worker: redact them at every handler, name the
    call each line is about, and write TOOLRUN_LOG_FORMAT (json: one object a line)."""
    settings = get_settings()
    prepare_handlers(logger, settings.log_format, redactor_for(settings.redaction_patterns))


@signals.celeryd_init.connect
def _no_banner_in_json_logs(instance=None, **_: object) -> None:
    """The startup banner is printed, not logged: a JSON log goes without it."""
    if instance is not None and get_settings().log_format == "json":
        instance.quiet = True


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
