"""Log records leave a worker too: every handler gets a filter that redacts the
formatted message, whoever wrote it (toolrun, Celery, or a tool's print)."""

from __future__ import annotations

import logging

from runtime.redaction import redact_text


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def redact_handlers(logger: logging.Logger) -> None:
    """Add the filter to every handler of `logger` (once)."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
