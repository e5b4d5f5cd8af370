"""The app per kind of broker: by default one Redis is broker and state, and
nothing about it changes; with an amqp:// broker the queues are quorum queues
that dead-letter, publishes are confirmed, and the results stay in Redis."""

from __future__ import annotations

from runtime.keyspace.names import DEAD, EFFECTS, READS
from runtime.settings import Settings
from runtime.transport import broker
from runtime.transport.app import make_app

STATE = "redis://:pw@127.0.0.1:6399/0"
RABBIT = "amqp://guest:guest@127.0.0.1:5672/toolrun"


def test_by_default_the_state_redis_is_the_broker_with_its_visibility_timeout(tmp_path):
    app = make_app(Settings(home=tmp_path, visibility_timeout=30), redis_url=STATE)
    assert (app.conf.broker_url, app.conf.result_backend) == (STATE, STATE)
    assert app.conf.broker_transport_options["visibility_timeout"] == 30
    assert not app.conf.task_queues  # Celery's own queue declarations, as before


def test_an_amqp_broker_gets_quorum_queues_that_dead_letter_and_confirmed_publishes(tmp_path):
    settings = Settings(home=tmp_path, broker_url=RABBIT, max_deliveries=4)
    app = make_app(settings, redis_url=STATE)
    assert (app.conf.broker_url, app.conf.result_backend) == (RABBIT, STATE)
    assert app.conf.broker_transport_options == {"confirm_publish": True}
    queues = app.amqp.queues
    assert set(queues) == {READS, EFFECTS}  # a worker without -Q never consumes the dead
    for name in (READS, EFFECTS):
        assert queues[name].queue_arguments == {
            "x-queue-type": "quorum",
            "x-delivery-limit": 4,
            "x-dead-letter-exchange": DEAD,
            "x-dead-letter-routing-key": DEAD,
        }
        assert queues[name].durable
    limited = Settings(home=tmp_path, broker_url=RABBIT, delivery_limit=2)
    assert broker.delivery_limit(limited) == 2


def test_only_amqp_urls_count_as_rabbitmq():
    assert broker.is_amqp(RABBIT) and broker.is_amqp("amqps://h//")
    assert not broker.is_amqp(STATE) and not broker.is_amqp("sentinel://h:26379")
