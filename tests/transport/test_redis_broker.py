"""Celery's broker on Redis takes several messages per round trip: once a
BRPOP brings one, one script takes as many more as the prefetch has room
for, each with its unacked copy stored as kombu stores it; on a real
redis-server, through kombu's own consumer."""

from __future__ import annotations

import base64
import json
import ssl
import time

import pytest
import redis
from kombu import Connection, Consumer, Exchange, Producer, Queue

from runtime.settings import Settings
from runtime.stack.processes import stop_process
from runtime.stack.redis_server import redis_needles, start_redis
from runtime.transport import redis_broker
from runtime.transport.app import make_app
from tests.support import tls_redis
from tests.support.waiting import wait_for

pytestmark = pytest.mark.server

QUEUE = Queue("q", Exchange("q", type="direct"), routing_key="q")


@pytest.fixture
def url(tmp_path):
    found, pid = start_redis(Settings(home=tmp_path))
    yield found
    stop_process(pid, needles=redis_needles(found))


def calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {
        name: stats.get(f"cmdstat_{name}", {}).get("calls", 0)
        for name in ("brpop", "blmpop", "exec")
    }


def drained(client: redis.Redis, connection: Connection) -> dict[str, int]:
    """The pops and transactions one turn of the consumer sent."""
    before = calls(client)
    connection.drain_events(timeout=5)
    return {name: count - before[name] for name, count in calls(client).items()}


def publish(connection: Connection, count: int, first: int = 0) -> None:
    producer = Producer(connection.default_channel, serializer="json")
    for n in range(first, first + count):
        producer.publish({"n": n}, exchange=QUEUE.exchange, routing_key="q", declare=[QUEUE])


def taking(connection: Connection, prefetch: int, fail_at: int | None = None):
    got: list = []

    def received(body, message):
        got.append(message)
        if body["n"] == fail_at:
            raise RuntimeError("the consumer failed")

    consumer = Consumer(connection.channel(), [QUEUE], callbacks=[received], accept=["json"])
    consumer.qos(prefetch_count=prefetch)
    consumer.consume()
    return consumer, got


def test_one_brpop_brings_as_many_messages_as_the_prefetch_has_room_for(url):
    client = redis.Redis.from_url(url)
    with Connection(url, transport=redis_broker.NAME) as connection:
        publish(connection, 6)
        consumer, got = taking(connection, prefetch=4)
        spent = drained(client, connection)
        assert [m.decode()["n"] for m in got] == [0, 1, 2, 3]  # in order, as sent
        assert spent == {"brpop": 0, "blmpop": 1, "exec": 1}  # exec: the four copies
        assert client.llen("q") == 2  # the prefetch's room, no more
        copies = client.hgetall("unacked")
        assert {m.delivery_tag.encode() for m in got} == set(copies)
        for message in got:  # each copy as kombu's own: [payload, exchange, routing key]
            payload, exchange, routing_key = json.loads(copies[message.delivery_tag.encode()])
            assert payload["properties"]["delivery_tag"] == message.delivery_tag
            assert (base64.b64decode(payload["body"]), exchange, routing_key) == (
                message.body,
                "q",
                "q",
            )
        assert client.zcard("unacked_index") == 4
        for message in got:
            message.ack()
        assert client.hlen("unacked") == 0 and client.zcard("unacked_index") == 0
        connection.drain_events(timeout=5)
        assert [m.decode()["n"] for m in got[4:]] == [4, 5]
        consumer.cancel()


def test_a_lone_message_costs_what_it_did_with_kombus_brpop(url):
    client = redis.Redis.from_url(url)
    with Connection(url, transport=redis_broker.NAME) as connection:
        publish(connection, 1)
        _, got = taking(connection, prefetch=16)
        spent = drained(client, connection)
        assert [m.decode()["n"] for m in got] == [0]
        assert spent == {"brpop": 0, "blmpop": 1, "exec": 1}  # kombu's own copy


def test_a_redis_that_refuses_blmpop_gets_kombus_brpop(url):
    admin = redis.Redis.from_url(url)
    admin.acl_setuser(
        "old",
        enabled=True,
        passwords=["+secret"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-blmpop"],
    )
    port = admin.connection_pool.connection_kwargs["port"]
    limited = f"redis://old:secret@127.0.0.1:{port}/0"
    with Connection(limited, transport=redis_broker.NAME) as connection:
        publish(connection, 3)
        _, got = taking(connection, prefetch=4)
        deadline = time.monotonic() + 30  # a busy machine: turns until all three came
        while len(got) < 3 and time.monotonic() < deadline:
            try:
                connection.drain_events(timeout=1)
            except TimeoutError:  # the refused BLMPOP's turn, or a slow one
                continue
        assert [m.decode()["n"] for m in got] == [0, 1, 2]  # one per BRPOP, all there


def test_messages_taken_and_not_acknowledged_go_back_when_the_consumer_closes(url):
    client = redis.Redis.from_url(url)
    with Connection(url, transport=redis_broker.NAME) as connection:
        publish(connection, 5)
        _, got = taking(connection, prefetch=3)
        connection.drain_events(timeout=5)
        assert len(got) == 3
        got[0].ack()
    assert client.hlen("unacked") == 0  # restored as kombu restores its own
    with Connection(url, transport=redis_broker.NAME) as connection:
        _, again = taking(connection, prefetch=10)
        connection.drain_events(timeout=5)
        assert sorted(m.decode()["n"] for m in again) == [1, 2, 3, 4]


def test_a_consumer_that_fails_gives_the_messages_after_it_back_at_once(url):
    client = redis.Redis.from_url(url)
    with Connection(url, transport=redis_broker.NAME) as connection:
        publish(connection, 5)
        _, got = taking(connection, prefetch=5, fail_at=1)
        with pytest.raises(RuntimeError):
            connection.drain_events(timeout=5)
        assert [m.decode()["n"] for m in got] == [0, 1]
        # 2, 3 and 4 were taken with the second one: back in the queue, next in line
        assert [number(item) for item in reversed(client.lrange("q", 0, -1))] == [2, 3, 4]
        assert client.hlen("unacked") == 2  # the two delivered keep their copies


def number(item: bytes) -> int:
    """The `n` of a message as it sits in the queue."""
    return json.loads(base64.b64decode(json.loads(item)["body"]))["n"]


def test_a_malformed_message_fails_as_with_kombu_and_those_after_it_go_back(url):
    client = redis.Redis.from_url(url)
    with Connection(url, transport=redis_broker.NAME) as connection:
        publish(connection, 2)
        client.lpush("q", json.dumps({"no": "properties"}))
        publish(connection, 2, first=2)
        _, got = taking(connection, prefetch=10)
        with pytest.raises(KeyError):  # kombu's own Message cannot be built from it
            connection.drain_events(timeout=5)
        assert [m.decode()["n"] for m in got] == [0, 1]
        assert [number(item) for item in reversed(client.lrange("q", 0, -1))] == [2, 3]
        assert client.hlen("unacked") == 2


def test_messages_none_of_them_kombus_are_dropped_as_kombu_drops_each(url):
    client = redis.Redis.from_url(url)
    with Connection(url, transport=redis_broker.NAME) as connection:
        publish(connection, 1)  # the queue exists
        client.delete("q")
        client.lpush("q", json.dumps({"no": 1}), json.dumps({"no": 2}))
        _, got = taking(connection, prefetch=10)
        with pytest.raises(KeyError):  # as kombu's own Message would
            connection.drain_events(timeout=5)
        assert got == [] and client.hlen("unacked") == 0
        assert client.llen("q") == 0  # not put back to fail again: kombu drops each
        publish(connection, 1, first=7)  # and the queue goes on
        connection.drain_events(timeout=5)
        assert [m.decode()["n"] for m in got] == [7]


def test_the_app_takes_it_on_redis_and_sentinel_and_leaves_rabbitmq_to_kombu(tmp_path):
    state = "redis://:pw@127.0.0.1:6399/0"
    assert make_app(Settings(home=tmp_path), redis_url=state).conf.broker_transport == (
        redis_broker.NAME
    )
    sentinel = Settings(home=tmp_path, broker_url="sentinel://127.0.0.1:26379/0")
    assert make_app(
        sentinel.model_copy(update={"redis_master_name": "m"}), redis_url=state
    ).conf.broker_transport == (redis_broker.SENTINEL)
    others = ("amqp://guest:guest@127.0.0.1:5672//",)
    for broker_url in others:
        settings = Settings(home=tmp_path, broker_url=broker_url, redis_master_name="m")
        assert make_app(settings, redis_url=state).conf.broker_transport is None


def test_a_pop_whose_socket_errs_puts_what_it_took_back_at_the_head_of_its_queue(url):
    """kombu reads the reply of a pop whose socket reported an error and drops
    it; the messages a BLMPOP had taken go back, first in line as they were."""
    client = redis.Redis.from_url(url)
    with Connection(url, transport=redis_broker.NAME) as connection:
        publish(connection, 4)
        consumer, got = taking(connection, prefetch=3)
        channel = consumer.channel
        # As kombu's poller starts a pop: the BLMPOP sent, its reply (three messages) not read
        connection.transport.cycle._register_BRPOP(channel)
        assert channel._popping == 3
        wait_for(lambda: client.llen("q") <= 1, 10, "pop of three messages", every=0.01)
        channel._poll_error("BRPOP")  # as kombu's poller calls it on the socket's error
        assert channel._popping == 0 and got == []
        assert [number(item) for item in reversed(client.lrange("q", 0, -1))] == [0, 1, 2, 3]
        assert client.hlen("unacked") == 0  # nothing was delivered, so nothing was kept
        connection.drain_events(timeout=5)  # the next pop starts, and takes them again
        assert [m.decode()["n"] for m in got] == [0, 1, 2]


def closed_under_its_connection(connection: Connection, client: redis.Redis, queue: str) -> int:
    """Take two messages without acknowledging them, then close the channel as
    Celery does when Redis goes away: the connection first (kombu cuts its
    transport loose), then the channel, which restores its messages. How many
    came back to the queue."""
    publish(connection, 2)
    consumer, got = taking(connection, prefetch=2)
    connection.drain_events(timeout=5)
    assert len(got) == 2
    channel = consumer.channel
    channel.connection.client = None  # what kombu's Connection._close does to its transport
    channel.close()
    return client.llen(queue)


def test_a_channel_closed_after_its_connection_restores_its_messages(url):
    """kombu's own channel built a new pool from the connection it had lost
    and raised AttributeError there, which Celery counts as unrecoverable
    (docs/architecture.md, "Brokers")."""
    client = redis.Redis.from_url(url)
    with Connection(url, transport=redis_broker.NAME) as connection:
        assert closed_under_its_connection(connection, client, "q") == 2
        assert client.hlen("unacked") == 0


@pytest.mark.skipif(not tls_redis.available(), reason="no redis-server or openssl: TLS untested")
def test_over_tls_the_app_takes_it_with_tls_on_and_it_keeps_its_pool_once_closed(tmp_path):
    """`rediss://` gets toolrun's transport with TLS on and the certificate
    checked (kombu's own turned TLS on by the transport's name, without a
    check unless told); the URL's `ssl_*` options are kept."""
    with tls_redis.tls_redis(tmp_path / "tls") as (url, ca):
        broker_url = f"{url}?ssl_ca_certs={ca}"
        app = make_app(
            Settings(home=tmp_path, broker_url=broker_url), redis_url="redis://127.0.0.1:1/0"
        )
        assert app.conf.broker_transport == redis_broker.NAME
        client = redis.Redis.from_url(url, ssl_ca_certs=str(ca))
        with app.connection_for_write() as connection:
            assert closed_under_its_connection(connection, client, "q") == 2
        assert app.conf.broker_use_ssl == {"ssl_cert_reqs": ssl.CERT_REQUIRED}
