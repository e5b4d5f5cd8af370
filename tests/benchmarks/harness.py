"""Both sides on one embedded stack: a private redis-server, toolrun's reads and
effects workers (ledger on, SQLite) with a client, and bare Celery workers for
`baseline.py` on queues of their own, with the same pools and concurrency."""

from __future__ import annotations

import json
import os
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from runtime.client import Runtime
from runtime.settings import Settings
from runtime.stack.embedded import StackRecord, add_worker, start_stack, stop_stack
from tests.benchmarks import baseline, figures, tools


@dataclass
class Harness:
    settings: Settings
    record: StackRecord
    runtime: Runtime
    sides: figures.Sides
    conf: dict[str, Any]
    bare: list[dict] = field(default_factory=list)

    @property
    def slots(self) -> int:
        return self.settings.reads_concurrency

    def worker_pid(self, side: str, queue: str) -> int:
        """The first worker of `side` ("toolrun" or "baseline") on `queue` ("reads", "effects")."""
        if side == "toolrun":
            return next(w["pid"] for w in self.record.workers if w["queue"] == queue)
        return next(w["pid"] for w in self.bare if w["queue"] == f"baseline.{queue}")

    def processes(self) -> dict[str, int]:
        """The stack's processes by name, for CPU accounting (`cpu.Meter`)."""
        found = {
            f"{side} {queue} worker": self.worker_pid(side, queue)
            for side in ("toolrun", "baseline")
            for queue in ("reads", "effects")
        }
        return found | ({"redis": self.record.redis_pid} if self.record.redis_pid else {})

    def client_env(self) -> dict[str, str]:
        """The environment of a `toolrun` process that serves this stack's client
        side (the gateway, the MCP face): its settings, tools and signing key."""
        return dict(os.environ) | {
            "TOOLRUN_HOME": str(self.settings.home),
            "TOOLRUN_REDIS_URL": self.record.redis_url,
            "TOOLRUN_DATABASE_URL": self.record.database_url,
            "TOOLRUN_TOOL_MODULES": self.settings.tool_modules,
            "TOOLRUN_USER_SETTINGS_FILE": str(self.runtime.settings.user_settings_file),
            "TOOLRUN_SIGNING_KEY": self.record.signing_key,
            "PYTHONPATH": os.getcwd(),
        }

    def start_bare(self, queue: str, concurrency: int, index: int = 1) -> None:
        home, url = self.settings.home, self.record.redis_url
        worker = baseline.start_worker(
            home,
            url,
            self.conf,
            queue,
            concurrency=concurrency,
            index=index,
            broker_url=self.settings.broker_url,
        )
        self.bare.append(worker)
        baseline.wait_for(baseline.app, [worker])

    def client_under(self, policy: dict) -> Runtime:
        """A client of the stack under an org policy of its own (the workers read
        the policy from each signed message: they need nothing)."""
        path = self.settings.home / f"policy-{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(policy))
        return Runtime(self.runtime.settings.model_copy(update={"policy_file": path}))

    def add_reads_workers(self) -> None:
        """A second reads worker on each side."""
        add_worker(self.record, self.settings, "reads")
        self.start_bare(baseline.READS_QUEUE, self.slots, index=2)


@contextmanager
def harness(
    home: Path,
    slots: int,
    console: Console,
    extra_env: dict[str, str] | None = None,
    broker_url: str | None = None,
    database_url: str | None = None,
):
    """The stack (its workers' environment plus `extra_env`), a client, the bare
    workers; `broker_url`: Celery's broker for both sides (RabbitMQ, say), else
    the stack's Redis; `database_url`: toolrun's ledger, else SQLite under `home`."""
    settings = Settings(
        home=home,
        redis_url=None,
        database_url=database_url,
        broker_url=broker_url,
        tool_modules=tools.MODULE,
        reads_concurrency=slots,
        effects_concurrency=1,
    )
    console.log(f"starting the stack under {home}")
    record = start_stack(
        settings, flower=False, reads_workers=1, effects_workers=1, extra_env=extra_env
    )
    runtime, found = None, None
    try:
        workspace = home / "workspace"
        workspace.mkdir()
        user_file = home / "user-settings.json"
        user_file.write_text(json.dumps({"trusted_workspaces": [str(workspace)]}))
        client = {
            "redis_url": record.redis_url,
            "database_url": record.database_url,
            "user_settings_file": user_file,
        }
        runtime = Runtime(settings.model_copy(update=client))
        conf = baseline.shared_conf(runtime.deployment.app)
        baseline.app.conf.update(
            broker_url=broker_url or record.redis_url, result_backend=record.redis_url
        )
        baseline.app.conf.update(conf)
        found = Harness(settings, record, runtime, figures.Sides(runtime, workspace), conf)
        found.start_bare(baseline.READS_QUEUE, slots)
        found.start_bare(baseline.EFFECTS_QUEUE, 1)
        yield found
    finally:
        if runtime is not None:
            runtime.close()
        if found is not None:
            baseline.stop(found.bare)
        stop_stack(home)
