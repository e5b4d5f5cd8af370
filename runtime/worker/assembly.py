"""What a worker process is built from: the settings, the tools and the
signing key, loaded once in the worker's main process; and, per process, the
`Worker` on Celery and Redis that uses them."""

from __future__ import annotations

from dataclasses import dataclass

from celery import Celery

from runtime.assembly.parts import worker_transport
from runtime.config import signing_key
from runtime.ledger.store import Ledger
from runtime.registry.capabilities import Registry
from runtime.settings import Settings, get_settings
from runtime.tools.loading import load_tools
from runtime.worker.worker import Worker


@dataclass(frozen=True)
class Parts:
    settings: Settings
    registry: Registry
    key: bytes

    @classmethod
    def from_env(cls) -> Parts:
        settings = get_settings()
        registry = load_tools(settings.module_names, mcp_servers_file=settings.mcp_servers_file)
        return cls(settings, registry, signing_key(settings))

    def worker(self, app: Celery) -> Worker:
        """A `Worker` with this process's own ledger engine and Redis pool."""
        ledger = Ledger.from_settings(self.settings, lazy=True)
        transport = worker_transport(self.settings, app, redactor=ledger.redactor)
        return Worker(
            settings=self.settings,
            registry=self.registry,
            key=self.key,
            ledger=ledger,
            queue=transport,
            state=transport,
        )
