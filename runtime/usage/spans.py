"""How far back a usage report looks: `30m`, `12h`, `7d`, `2w`, or an ISO date
or time (UTC unless it says otherwise), as `toolrun usage --since` and
`GET /v1/usage?since=` take it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
MAX_DAYS = 3660


def since(text: str, now: datetime | None = None) -> datetime:
    """The moment `text` names; `ValueError` saying what to give otherwise."""
    now = now or datetime.now(UTC)
    found = re.fullmatch(r"(\d{1,6})([mhdw])", text.strip())
    if found:
        span = timedelta(**{UNITS[found[2]]: int(found[1])})
        return now - min(span, timedelta(days=MAX_DAYS))
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"since {text[:50]!r}: give a span (30m, 12h, 7d, 2w) or an ISO date"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
