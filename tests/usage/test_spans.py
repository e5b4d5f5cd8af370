"""How far back a usage report looks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runtime.usage.spans import since

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "back"),
    [
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("999999w", timedelta(days=3660)),
    ],
)
def test_a_span_counts_back_from_now(text, back):
    assert since(text, NOW) == NOW - back


def test_a_date_is_utc_unless_it_says_otherwise():
    assert since("2026-11-01", NOW) == datetime(2026, 11, 1, tzinfo=UTC)
    assert since("2026-11-01T00:00:00+01:00", NOW).utcoffset() == timedelta(hours=1)


@pytest.mark.parametrize("text", ["soon", "7 days", "-1d", "1y", ""])
def test_anything_else_says_what_to_give(text):
    with pytest.raises(ValueError, match=r"give a span \(30m, 12h, 7d, 2w\) or an ISO date"):
        since(text, NOW)
