"""Celery's broker, apart from toolrun's state: what the app is told for each
kind of broker URL, and, on RabbitMQ, the dead-letter queue a message lands in
once it was delivered too often (docs/architecture.md, "Brokers").

- Redis (`redis://`, `rediss://`, `sentinel://`): an unacknowledged message
  comes back after the visibility timeout; kombu looks for such messages often.
  On `redis://` a worker takes several messages per round trip
  (`redis_broker`, on `rediss://` too, with the server's certificate
  checked); a channel closed under a restart or a failover keeps its pool.
- RabbitMQ (`amqp://`, `amqps://`): `reads` and `effects` are quorum queues
  (replicated, durable), every publish waits for the broker's confirm, and a
  message returned more than `delivery_limit` times is dead-lettered to `DEAD`,
  whose messages the sweep ends with a result that says so. A consumer that
  holds a message longer than RabbitMQ's `consumer_timeout` loses its channel:
  that must be above the longest tool timeout plus the kill grace.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from celery import Celery
from kombu import Exchange, Queue

from runtime.keyspace.names import DEAD, QUEUES
from runtime.settings import Settings
from runtime.transport import redis_broker, redis_client

log = logging.getLogger("toolrun.broker")
AMQP_SCHEMES = {"amqp", "amqps", "pyamqp"}
DEAD_EXCHANGE = Exchange(DEAD, type="direct", durable=True)
DEAD_QUEUE = Queue(
    DEAD, DEAD_EXCHANGE, routing_key=DEAD, durable=True, queue_arguments={"x-queue-type": "quorum"}
)


def is_amqp(url: str) -> bool:
    return urlsplit(url).scheme in AMQP_SCHEMES


def delivery_limit(settings: Settings) -> int:
    """Returns of one message RabbitMQ allows before it dead-letters it. By
    default toolrun's own count (`max_deliveries`) gives a crashing read up
    first, on a worker; the dead-letter queue catches what dies before that."""
    return settings.delivery_limit or settings.max_deliveries


def task_queues(settings: Settings) -> list[Queue]:
    """`reads` and `effects` as quorum queues that dead-letter to `DEAD`."""
    arguments = {
        "x-queue-type": "quorum",
        "x-delivery-limit": delivery_limit(settings),
        "x-dead-letter-exchange": DEAD,
        "x-dead-letter-routing-key": DEAD,
    }
    return [
        Queue(
            name,
            # topic: Celery's native delayed delivery on quorum queues binds only those
            Exchange(name, type="topic", durable=True),
            routing_key=name,
            durable=True,
            queue_arguments=arguments,
        )
        for name in QUEUES
    ]


def options(settings: Settings, url: str, *, state_url: str) -> dict[str, Any]:
    """The app's settings that depend on the kind of broker `url` names, and
    on the state's Redis (`state_url`), which keeps Celery's results."""
    found = _broker_options(settings, url)
    if backend := redis_client.celery_options(settings, state_url):  # through Sentinel
        found["result_backend_transport_options"] = backend
        if tls := redis_client.celery_tls(settings):
            found["redis_backend_use_ssl"] = tls
    return found


def _broker_options(settings: Settings, url: str) -> dict[str, Any]:
    if is_amqp(url):
        return {
            "task_queues": task_queues(settings),
            "task_create_missing_queues": False,
            # Each publish waits for RabbitMQ's confirm: a refused message raises.
            "broker_transport_options": {"confirm_publish": True},
            # Quorum queues refuse a global prefetch (Celery 5.5+ turns it off).
            "worker_detect_quorum_queues": True,
        }
    return {
        # Redis redelivers an unacked message after this; it must outlast any tool's
        # timeout or a call still running is delivered twice.
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout,
            # kombu looks for messages past that timeout only every interval x
            # throttle seconds (10 x 10 by default): a lost worker's calls would
            # wait up to 100 s more. Look every few seconds, on every sweep.
            "unacked_restore_interval": min(10.0, max(1.0, settings.visibility_timeout / 3)),
            "unacked_restore_throttle": 1,
            # sentinel://: the master's name and the sentinels' password.
            **redis_client.celery_options(settings, url),
        },
        **({"broker_use_ssl": tls} if (tls := _tls(settings, url)) else {}),
        "broker_transport": redis_broker.SENTINEL
        if redis_client.is_sentinel(url)
        else redis_broker.NAME,
    }


def _tls(settings: Settings, url: str) -> dict[str, Any] | None:
    """TLS for the broker: Sentinel's when it is on; for `rediss://`, the
    certificate checked, as toolrun's own Redis clients check it (kombu turned
    TLS on by its transport's name, without a check unless told). A URL's own
    `ssl_*` options (`ssl_ca_certs`, `ssl_cert_reqs`) take precedence."""
    if redis_client.is_sentinel(url):
        return redis_client.celery_tls(settings)
    return {"ssl_cert_reqs": ssl.CERT_REQUIRED} if urlsplit(url).scheme == "rediss" else None


def declare_dead_letters(app: Celery) -> None:
    """Declare the dead-letter queue, so that RabbitMQ has somewhere to put a
    message it gives up on (it drops one with nowhere to go). No-op on Redis."""
    if not is_amqp(app.conf.broker_url):
        return
    with app.connection_for_write() as connection:
        DEAD_QUEUE(connection.default_channel).declare()


def drain_dead_letters(app: Celery, handle: Callable[[Any], None], *, limit: int = 100) -> int:
    """Hand each dead-lettered task message's call (its signed message, as
    sent) to `handle`, then acknowledge it; a message `handle` fails on stays
    for the next sweep. How many were handled; 0 on a broker with none."""
    if not is_amqp(app.conf.broker_url):
        return 0
    handled = 0
    with app.connection_for_write() as connection:
        queue = DEAD_QUEUE(connection.default_channel)
        queue.declare()
        for _ in range(limit):
            message = queue.get(no_ack=False, accept=["json"])
            if message is None:
                break
            try:
                args = message.decode()[0]  # protocol 2: [args, kwargs, embed]
                raw = args[0] if isinstance(args, list | tuple) and args else None
            except Exception as error:  # noqa: BLE001 - not a task message: nothing to end
                log.error("dead letter that is no task message dropped: %s", error)
                message.ack()
                continue
            try:
                handle(raw)
            except Exception:
                message.requeue()
                raise
            message.ack()
            handled += 1
    return handled


def waiting(app: Celery, queues: tuple[str, ...]) -> dict[str, int]:
    """Messages waiting in each queue, on either broker (a passive declare:
    kombu's Redis transport counts the list, RabbitMQ answers for its queue);
    a queue not declared yet has none."""
    counts: dict[str, int] = {}
    with app.connection_for_read() as connection:
        for name in queues:
            channel = connection.channel()  # RabbitMQ closes it if the queue is missing
            try:
                counts[name] = channel.queue_declare(queue=name, passive=True).message_count
            except connection.channel_errors:
                counts[name] = 0
            finally:
                try:
                    channel.close()
                except connection.channel_errors + connection.connection_errors:
                    pass
    return counts


def running(app: Celery, queues: tuple[str, ...], *, timeout: float = 1.0) -> dict[str, int]:
    """Calls the workers that answer within `timeout` are running, per queue
    they came from (Celery's `inspect active`)."""
    counts = dict.fromkeys(queues, 0)
    answers = app.control.inspect(timeout=timeout).active() or {}
    for requests in answers.values():
        for request in requests or []:
            queue = (request.get("delivery_info") or {}).get("routing_key")
            if queue in counts:
                counts[queue] += 1
    return counts


def load(app: Celery, queues: tuple[str, ...]) -> dict[str, tuple[int, int]] | None:
    """(waiting, running) per queue, what an autoscaler scales on; None while
    the broker does not answer."""
    try:
        waiting_now, running_now = waiting(app, queues), running(app, queues)
    except Exception as error:  # noqa: BLE001 - the broker away: no figures this time
        log.warning("queue figures unavailable: %s", error)
        return None
    return {queue: (waiting_now[queue], running_now[queue]) for queue in queues}


def ping(app: Celery, *, timeout: float = 5.0) -> None:
    """Raise unless the broker takes a connection within `timeout` seconds."""
    with app.connection_for_write(connect_timeout=timeout) as connection:
        connection.ensure_connection(max_retries=1, interval_start=0, timeout=timeout)
