"""Where a process finds its Redis, its broker and its signing key: the settings
(`TOOLRUN_REDIS_URL`, `TOOLRUN_BROKER_URL`, `TOOLRUN_SIGNING_KEY`) first, else
what the embedded stack recorded under `home`, the user's one from any directory
(docs/architecture.md, "Configuration").

Clients, workers and the gateway resolve both here, so they agree on them; the
embedded stack (`runtime.stack`) writes the record and reads it through here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.errors import StackError
from runtime.settings import Settings

STACK_RECORD = "stack.json"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"  # a bare app's, with no setting and no stack


def stack_record(home: Path | str) -> dict[str, Any] | None:
    """The embedded stack's record under `home` as written, or None if there is none."""
    path = Path(home) / STACK_RECORD
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise StackError(f"unreadable stack record {path}: {error}") from error
    if not isinstance(data, dict) or not isinstance(data.get("redis_url"), str):
        raise StackError(f"unreadable stack record {path}: it names no Redis URL")
    return data


def redis_url(settings: Settings, *, required: bool = True) -> str | None:
    """`TOOLRUN_REDIS_URL`, else the embedded stack's Redis recorded under `home`."""
    if settings.redis_url:
        return settings.redis_url
    record = stack_record(settings.home)
    if record is not None:
        return record["redis_url"]
    if required:
        where = Path(settings.home).resolve() / STACK_RECORD
        raise StackError(
            f"no stack is up (none recorded in {where}): run `toolrun up`, or set TOOLRUN_REDIS_URL"
        )
    return None


def broker_url(settings: Settings, *, state_url: str | None = None) -> str:
    """Celery's broker: `TOOLRUN_BROKER_URL`, else the one the embedded stack
    recorded for the state's Redis in use, else that Redis (`state_url`, or
    `redis_url`): by default one Redis is both."""
    if settings.broker_url:
        return settings.broker_url
    state_url = state_url or redis_url(settings, required=False) or DEFAULT_REDIS
    record = stack_record(settings.home)
    if (
        record is not None
        and record["redis_url"] == state_url
        and isinstance(record.get("broker_url"), str)
    ):
        return record["broker_url"]  # that stack's broker, for its clients
    return state_url


def signing_key(settings: Settings) -> bytes:
    """`TOOLRUN_SIGNING_KEY`, else the embedded stack's key; task messages are
    signed with it and workers run nothing that is not."""
    if settings.signing_key is not None:
        return settings.signing_key.get_secret_value().encode()
    record = stack_record(settings.home)
    if record is not None and record.get("signing_key"):
        return str(record["signing_key"]).encode()
    raise StackError("no signing key: set TOOLRUN_SIGNING_KEY (the same on clients and workers)")
