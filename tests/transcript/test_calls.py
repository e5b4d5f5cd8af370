"""A call's attempts from its events, in the order they were written: a start
opens one, a retry closes it and opens the next, an end closes the last, a
second start with the first still open closes that one as lost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from runtime.ledger.tables import EventRow
from runtime.transcript.calls import attempts, redactions

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _event(kind, seconds, **fields):
    return EventRow(
        batch_id="b", call_id="c", kind=kind, at=T0 + timedelta(seconds=seconds), **fields
    )


def test_retries_each_make_an_attempt_and_the_end_closes_the_last():
    events = [
        _event("decision", 0, effect="allow"),
        _event("started", 1, worker="w1@host", attempt=1),
        _event("retried", 2, worker="w1@host", attempt=1, reason="OSError: flaky"),
        _event("retried", 4, worker="w1@host", attempt=2, reason="OSError: flaky"),
        _event("finished", 4.5, worker="w1@host", attempt=3, status="ok"),
    ]
    found = attempts(events)
    assert [a["attempt"] for a in found] == [1, 2, 3]
    assert [a["ended"] for a in found] == ["retried", "retried", "ok"]
    assert [a["wall_ms"] for a in found] == [1000.0, 2000.0, 500.0]
    assert (
        found[0]["reason"] == "OSError: flaky"
        and found[2]["ended_at"] == "2026-12-01T12:00:04.500000Z"
    )


def test_a_lost_delivery_and_one_still_running():
    events = [
        _event("started", 1, worker="w1@a", attempt=1),
        _event("started", 9, worker="w2@b", attempt=2),
    ]
    first, second = attempts(events)
    assert first["ended"] == "lost" and first["wall_ms"] == 8000.0
    assert second["worker"] == "w2@b" and second["ended"] is None and second["wall_ms"] is None


def test_a_call_refused_before_it_ran_has_no_attempt():
    assert attempts([_event("lookup_failed", 0, status="unknown_tool")]) == []


def test_redactions_count_each_kind_once_per_place_it_was_cut():
    message = "a [REDACTED:github_token] b [REDACTED:github_token] [REDACTED:password]"
    content = {"text": "a [REDACTED:github_token] b [REDACTED:github_token]"}
    assert redactions(message, content, None) == {"github_token": 2, "password": 1}


def test_the_queue_wait_is_the_delivery_s_and_the_cpu_time_the_try_s_that_ended_it():
    figures = {"summary": "ok", "duration_ms": 2000.0, "queue_wait_ms": 12.5, "cpu_ms": 40.0}
    events = [
        _event("started", 1, worker="w1@host", attempt=1),
        _event("retried", 2, worker="w1@host", attempt=1, reason="OSError: flaky"),
        _event("finished", 3, worker="w1@host", attempt=2, status="ok", detail=figures),
    ]
    first, second = attempts(events)
    assert (first["queue_wait_ms"], first["cpu_ms"]) == (12.5, None)  # a retry is not queued
    assert (second["queue_wait_ms"], second["cpu_ms"]) == (None, 40.0)


def test_an_end_without_figures_and_a_lost_delivery_show_none():
    events = [
        _event("started", 1, worker="w1@a", attempt=1),
        _event("started", 9, worker="w2@b", attempt=2),
        _event("finished", 10, worker="w2@b", attempt=2, status="ok", detail={"summary": "ok"}),
    ]
    for attempt in attempts(events):
        assert attempt["queue_wait_ms"] is None and attempt["cpu_ms"] is None
