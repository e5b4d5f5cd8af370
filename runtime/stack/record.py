"""What an embedded stack is made of, as recorded in `<home>/stack.json`.

The record (mode 0600: it holds the Redis and Flower passwords) lets another
process find this stack's Redis, or stop exactly what was started.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict

from runtime import config
from runtime.errors import StackError

RECORD = config.STACK_RECORD


class WorkerInfo(TypedDict):
    name: str  # the Celery node name, as `control.ping(destination=...)` wants it
    queue: str
    pid: int
    log: str


class FlowerInfo(TypedDict):
    url: str
    user: str
    password: str
    pid: int


class GatewayInfo(TypedDict):
    url: str
    pid: int


@dataclass
class StackRecord:
    home: Path
    redis_url: str
    database_url: str
    redis_pid: int | None  # None: TOOLRUN_REDIS_URL names a Redis the stack did not start
    workers: list[WorkerInfo] = field(default_factory=list)
    flower: FlowerInfo | None = None
    signing_key: str | None = None  # HMAC key shared by this stack's client and workers
    supervisor_pid: int | None = None  # `runtime.stack.supervisor`, which restarts lost workers
    gateway: GatewayInfo | None = None  # `toolrun serve`, when `toolrun up` started it
    broker_url: str | None = None  # TOOLRUN_BROKER_URL the stack ran with; None: its Redis

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "home": str(self.home)}, indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> StackRecord:
        return cls(**{**data, "home": Path(data["home"])})

    def save(self) -> Path:
        """Write `home/stack.json`, readable by its owner only, replacing it atomically."""
        path = self.home / RECORD
        draft = self.home / f".{RECORD}.{os.getpid()}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            os.fchmod(out.fileno(), 0o600)
            out.write(self.to_json())
        os.replace(draft, path)
        return path


def load_record(home: Path) -> StackRecord | None:
    """The stack recorded under `home`, or None if there is none."""
    data = config.stack_record(home)
    if data is None:
        return None
    try:
        return StackRecord.from_dict(data)
    except (ValueError, TypeError, KeyError) as error:
        raise StackError(f"unreadable stack record {Path(home) / RECORD}: {error}") from error
