"""What a process that serves the cluster reads of it beside its batches:
the gateway's readiness and metrics, and `toolrun metrics`. A `Runtime`
hands this out instead of its own connections (docs/architecture.md,
"Assembly")."""

from __future__ import annotations

from dataclasses import dataclass

import redis
from celery import Celery

from runtime.errors import StateUnavailable
from runtime.flow.throttle import Throttle
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import Ledger
from runtime.transport import broker
from runtime.transport.cluster import CeleryTransport


@dataclass(frozen=True)
class Deployment:
    """The stores a deployment's figures are read from. `on_celery` is None
    on the in-process transport, which has no broker, no Redis, and enforces
    no rates, caps, fair share or Redis-held budgets."""

    ledger: Ledger
    approvals: Approvals
    on_celery: CeleryTransport | None = None
    redis_url: str | None = None  # where the state's Redis is

    @property
    def app(self) -> Celery | None:
        """The Celery app, whose broker counts the calls waiting."""
        return self.on_celery.app if self.on_celery is not None else None

    @property
    def client(self) -> redis.Redis | None:
        """The Redis that holds the batches' shared state."""
        return self.on_celery.client if self.on_celery is not None else None

    @property
    def throttle(self) -> Throttle | None:
        """Rates, caps and fair share across the cluster ("Flow control")."""
        return self.on_celery.throttle if self.on_celery is not None else None

    def budgets_used(self) -> dict[str, float] | None:
        """Each budget counter Redis holds now; None: none are held here."""
        return self.on_celery.budgets_used() if self.on_celery is not None else None

    def ping(self) -> None:
        """Raise unless the state's Redis, the broker (when it is not that
        Redis) and the ledger answer: the deployment can take batches."""
        if self.on_celery is None:
            raise StateUnavailable("the in-process transport has no Redis to answer")
        self.on_celery.client.ping()
        if self.on_celery.app.conf.broker_url != self.redis_url:
            broker.ping(self.on_celery.app)
        self.ledger.ping()
