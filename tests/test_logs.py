"""Log lines: redacted, naming the batch and call they are about, and one JSON
object per line when TOOLRUN_LOG_FORMAT=json. The workers' real log files are
checked in tests/integration/test_compose_commands.py."""

from __future__ import annotations

import contextvars
import io
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from runtime.logs import (
    CallTextFormatter,
    JsonFormatter,
    current_call,
    enter_call,
    leave_call,
    prepare_handlers,
)
from runtime.redaction import redactor_for


@contextmanager
def call_context(batch_id: str, call_id: str | None = None) -> Iterator[None]:
    """What the worker does around a task: enter the call, then leave it."""
    token = enter_call(batch_id, call_id)
    try:
        yield
    finally:
        leave_call(token)


SECRET = "ghp_" + "LogSecret1" * 4


@pytest.fixture
def capture():
    """A logger with one handler writing to a buffer; `lines()` reads it back."""
    logger = logging.getLogger(f"toolrun.test.{uuid.uuid4().hex}")
    logger.propagate, logger.level = False, logging.DEBUG
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)

    def lines() -> list[str]:
        return stream.getvalue().splitlines()

    yield logger, lines
    logger.removeHandler(handler)


def test_json_lines_carry_the_call_and_nothing_secret(capture):
    logger, lines = capture
    prepare_handlers(logger, "json")
    with call_context("batch-1", "call-7"):
        logger.info("fetching with token %s", SECRET)
    logger.warning("between calls")
    first, second = (json.loads(line) for line in lines())
    assert (first["batch_id"], first["call_id"], first["level"]) == ("batch-1", "call-7", "INFO")
    assert SECRET not in first["message"] and "[REDACTED" in first["message"]
    assert first["time"].endswith("+00:00") and first["logger"] == logger.name
    assert "batch_id" not in second and second["message"] == "between calls"


def test_a_traceback_stays_on_one_json_line_and_is_redacted(capture):
    logger, lines = capture
    prepare_handlers(logger, "json")
    try:
        raise ValueError(f"bad key {SECRET}\nsecond line")
    except ValueError:
        with call_context("b", "c"):
            logger.exception("tool failed")
    [line] = lines()
    entry = json.loads(line)
    assert "ValueError" in entry["exception"] and SECRET not in line
    assert entry["call_id"] == "c"


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_lines_are_redacted_with_the_processs_own_patterns(capture, log_format):
    """The process's settings are given to `prepare_handlers` at its entry point
    (a worker, the gateway): their patterns redact its lines and tracebacks."""
    logger, lines = capture
    prepare_handlers(logger, log_format, redactor_for({"acme": r"ACME-\d{8}"}))
    logger.info("order ACME-12345678 placed")
    try:
        raise ValueError("ACME-87654321 refused")
    except ValueError:
        logger.exception("failed")
    text = "\n".join(lines())
    assert "ACME-1" not in text and "ACME-8" not in text
    assert "order [REDACTED:acme] placed" in text and "ValueError: [REDACTED:acme] refused" in text


def test_text_lines_end_with_the_call(capture):
    logger, lines = capture
    prepare_handlers(logger, "text")
    with call_context("batch-1", "call-7"):
        logger.info("running")
    logger.info("idle")
    assert lines() == ["INFO running [batch batch-1 call call-7]", "INFO idle"]


def test_preparing_twice_changes_nothing(capture):
    logger, lines = capture
    prepare_handlers(logger, "text")
    prepare_handlers(logger, "text")
    [handler] = [h for h in logger.handlers if type(h) is logging.StreamHandler]
    assert len(handler.filters) == 2
    assert isinstance(handler.formatter, CallTextFormatter)
    assert not isinstance(handler.formatter.inner, CallTextFormatter)
    prepare_handlers(logger, "json")
    assert isinstance(handler.formatter, JsonFormatter)


def test_celerys_received_line_is_matched_through_the_argsrepr(capture):
    """Celery logs "Task ... received" outside the task, with the line's fields
    as extra={"data": ...}; the dispatcher's argsrepr names the batch and call."""
    logger, lines = capture
    prepare_handlers(logger, "json")
    shown = json.dumps([{"batch_id": "b9", "call_id": "c3", "tool": "nap", "arguments": {}}])
    data = {"id": "t1", "name": "toolrun.nap", "args": shown, "kwargs": "{}", "eta": None}
    logger.info("Task %(name)s[%(id)s] received", data, extra={"data": data})
    data = {"id": "t2", "name": "other", "args": "[1, 2]", "kwargs": "{}", "eta": None}
    logger.info("Task %(name)s[%(id)s] received", data, extra={"data": data})
    first, second = (json.loads(line) for line in lines())
    assert first["message"] == "Task toolrun.nap[t1] received"
    assert (first["batch_id"], first["call_id"]) == ("b9", "c3")
    assert "batch_id" not in second


def test_contexts_nest_and_end():
    assert current_call() is None
    with call_context("b", "outer"):
        with call_context("b", "inner"):
            assert current_call() == ("b", "inner")
        assert current_call() == ("b", "outer")
    assert current_call() is None


def test_a_thread_sees_the_call_only_when_given_the_context():
    seen = {}
    with call_context("b", "c"):
        plain = threading.Thread(target=lambda: seen.update(plain=current_call()))
        context = contextvars.copy_context()
        carried = threading.Thread(
            target=context.run, args=(lambda: seen.update(run=current_call()),)
        )
        for thread in (plain, carried):
            thread.start()
            thread.join()
    assert seen == {"plain": None, "run": ("b", "c")}
