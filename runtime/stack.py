"""The embedded stack: a private redis-server, workers and Flower on loopback."""

from __future__ import annotations

import json

from runtime.errors import StackError
from runtime.settings import Settings

RECORD = "stack.json"


def redis_url_for(settings: Settings, *, required: bool = True) -> str | None:
    """`TOOLRUN_REDIS_URL`, else the embedded stack's Redis recorded under `home`."""
    if settings.redis_url:
        return settings.redis_url
    record = settings.home / RECORD
    if record.exists():
        return json.loads(record.read_text())["redis_url"]
    if required:
        raise StackError("no Redis: run `toolrun up` or set TOOLRUN_REDIS_URL")
    return None
