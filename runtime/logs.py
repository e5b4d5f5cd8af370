"""Log records leave a worker too: every handler gets a filter that redacts the
formatted message, whoever wrote it (toolrun, Celery, or a tool's print).

Every line about a call carries its batch id and call id: code that works on a
call runs between `enter_call(batch_id, call_id)` and `leave_call` (the worker
enters each task's call in Celery's task_prerun and leaves it in task_postrun),
and Celery's own "received" line is matched through the task's redacted
argsrepr, which names both. `TOOLRUN_LOG_FORMAT=json` makes each record
one JSON object on one line; text lines end with `[batch <id> call <id>]`.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any

from runtime.redaction import BUILT_IN, Redactor

CallIds = tuple[str, str | None]
_CALL: ContextVar[CallIds | None] = ContextVar("toolrun_call", default=None)
_FIELDS = ("batch_id", "call_id", "task_id", "task_name")


class RedactingFilter(logging.Filter):
    """Redacts each record with the redactor of the settings the process was
    started with (a worker's, the gateway's), given by `prepare_handlers`."""

    def __init__(self, redactor: Redactor = BUILT_IN) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.redactor.redact_text(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            formatted = logging.Formatter().formatException(record.exc_info)
            record.exc_text = self.redactor.redact_text(formatted)
            record.exc_info = None
        return True


def enter_call(batch_id: str, call_id: str | None = None) -> Token:
    """From now on, log records made in this thread or task name this batch and
    call (a thread started meanwhile sees them only if its target runs through
    `contextvars.copy_context().run`); pass the token to `leave_call`."""
    return _CALL.set((batch_id, call_id))


def leave_call(token: Token) -> None:
    _CALL.reset(token)


def current_call() -> CallIds | None:
    return _CALL.get()


class CallFilter(logging.Filter):
    """Sets `batch_id` and `call_id` on each record (None when it is about no call)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "batch_id", None) is None:  # `extra=` may have set them
            record.batch_id, record.call_id = current_call() or _ids_in_task_line(record)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a traceback included)."""

    def __init__(self, redactor: Redactor = BUILT_IN) -> None:
        super().__init__()
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "process": record.processName,
            "message": record.getMessage(),
        }
        for name in _FIELDS:
            value = getattr(record, name, None)
            if value not in (None, "???"):  # Celery's task formatter says ??? outside a task
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.redactor.redact_text(self.formatException(record.exc_info))
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


class CallTextFormatter(logging.Formatter):
    """Another formatter's line, with the call it is about appended."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        text = self.inner.format(record)
        batch_id = getattr(record, "batch_id", None)
        if batch_id is None:
            return text
        return f"{text} [batch {batch_id} call {getattr(record, 'call_id', None) or '-'}]"


def prepare_handlers(
    logger: logging.Logger, log_format: str = "text", redactor: Redactor = BUILT_IN
) -> None:
    """Every handler of `logger` redacts with `redactor` (the process's, from
    the settings it started with), names the call, and writes `log_format`
    ("text" or "json"). Safe to call again."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(redactor))
        if not any(isinstance(f, CallFilter) for f in handler.filters):
            handler.addFilter(CallFilter())
        current = handler.formatter
        if log_format == "json":
            if not isinstance(current, JsonFormatter):
                handler.setFormatter(JsonFormatter(redactor))
        elif not isinstance(current, CallTextFormatter):
            handler.setFormatter(CallTextFormatter(current))


def _ids_in_task_line(record: logging.LogRecord) -> CallIds | tuple[None, None]:
    """The ids in a line Celery writes about a task outside it ("received"):
    Celery passes the line's fields as `extra={"data": ...}`, and the task's
    argsrepr (redacted by the dispatcher) is `[{"batch_id": ..., "call_id": ...}]`."""
    data = getattr(record, "data", None)
    shown = data.get("args") if isinstance(data, dict) else None
    if not isinstance(shown, str) or '"batch_id"' not in shown:
        return None, None
    try:
        first = json.loads(shown)[0]
        return str(first["batch_id"]), str(first["call_id"])
    except (ValueError, LookupError, TypeError):
        return None, None
