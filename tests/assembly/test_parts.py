"""What a client and a worker build from the settings (`assembly/parts.py`):
the Celery transport of each, and an advancer with the settings' timings.
Nothing here connects: Redis and the broker are reached on first use."""

from __future__ import annotations

from celery import Celery

from runtime.assembly.parts import advancer, client_transport, worker_transport
from runtime.flow.limits import Limits
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import Ledger
from runtime.redaction import BUILT_IN
from runtime.registry.capabilities import Registry
from runtime.settings import Settings
from runtime.transport.cluster import CeleryTransport
from runtime.transport.memory import MemoryTransport

NOWHERE = "redis://127.0.0.1:1/0"  # no connection is made to it


def test_a_client_transport_sends_with_its_own_app_and_signs_with_the_deployment_key(tmp_path):
    transport = client_transport(Settings(home=tmp_path), NOWHERE, redactor=BUILT_IN)
    try:
        assert isinstance(transport, CeleryTransport)
        assert transport.key is None  # the deployment's key, from the settings
        assert transport.app.conf.broker_url == NOWHERE
        assert transport.throttle is not None  # rates and caps are held in this Redis
    finally:
        transport.close()


def test_a_worker_transport_finds_the_state_where_the_settings_say_else_the_backend(tmp_path):
    app = Celery("toolrun-test", broker=NOWHERE, backend="redis://127.0.0.1:1/3")
    named = Settings(home=tmp_path, redis_url="redis://127.0.0.1:1/5")
    for settings, db in ((named, 5), (Settings(home=tmp_path), 3)):
        transport = worker_transport(settings, app, redactor=BUILT_IN)
        try:
            assert transport.app is app
            assert transport.client.connection_pool.connection_kwargs["db"] == db
        finally:
            transport.close()


def test_the_advancer_takes_its_timings_from_the_settings(tmp_path):
    settings = Settings(home=tmp_path, unrecorded_patience=2.5, lease_seconds=7.0)
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    transport = MemoryTransport(limits=Limits(), worker=lambda _: None)
    try:
        made = advancer(
            settings,
            ledger=ledger,
            registry=Registry(),
            key=transport.key,
            queue=transport,
            state=transport,
            approvals=Approvals(ledger, transport.key),
            notifiers=(),
        )
        assert made.unrecorded.patience == 2.5
        assert made.viewer.lease_seconds == 7.0
    finally:
        transport.close()
        ledger.close()
