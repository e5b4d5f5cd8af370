"""toolrun's Redis client, from a URL: `redis://` (or `rediss://`) directly,
or `sentinel://` through Redis Sentinel, which finds the master of
`TOOLRUN_REDIS_MASTER_NAME` and follows it across a failover
(docs/architecture.md, "Sentinel").

A Sentinel URL is Celery's: one `sentinel://[:password@]host:port[/db]` per
sentinel, joined by `;`; the password there is the master's, the sentinels'
own is `TOOLRUN_REDIS_SENTINEL_PASSWORD`. Celery's broker and result store get
the same master name and sentinel password (`celery_options`).
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
from redis.sentinel import Sentinel

from runtime.errors import ConfigurationError
from runtime.settings import Settings

SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelAddress:
    sentinels: list[tuple[str, int]]
    password: str | None  # the master's
    username: str | None
    db: int


def is_sentinel(url: str) -> bool:
    return urlsplit(url.split(";", 1)[0].strip()).scheme == "sentinel"


def parse(url: str) -> SentinelAddress:
    """The sentinels of a `sentinel://...;sentinel://...` URL, and the master's
    credentials and database (from the first that names them)."""
    sentinels, password, username, db = [], None, None, 0
    for index, chunk in enumerate(part.strip() for part in url.split(";") if part.strip()):
        parts = urlsplit(chunk)
        if parts.scheme != "sentinel" or not parts.hostname:
            raise ConfigurationError(f"not a sentinel://host:port URL: {chunk!r}")
        sentinels.append((parts.hostname, parts.port or SENTINEL_PORT))
        if password is None and parts.password:
            password = unquote(parts.password)
            username = unquote(parts.username) if parts.username else None
        if index == 0 and parts.path.strip("/"):
            try:
                db = int(parts.path.strip("/"))
            except ValueError:
                raise ConfigurationError(f"not a database number: {parts.path!r}") from None
    return SentinelAddress(sentinels, password, username, db)


def master_name(settings: Settings) -> str:
    if not settings.redis_master_name:
        raise ConfigurationError(
            "a sentinel:// URL needs TOOLRUN_REDIS_MASTER_NAME (the name the sentinels monitor)"
        )
    return settings.redis_master_name


def sentinel_kwargs(settings: Settings) -> dict[str, Any]:
    """How to reach the sentinels themselves: their password, TLS."""
    found: dict[str, Any] = {}
    if settings.redis_sentinel_password is not None:
        found["password"] = settings.redis_sentinel_password.get_secret_value()
    if settings.redis_sentinel_tls:
        found["ssl"] = True
    return found


def state_client(settings: Settings, url: str, **options: Any) -> redis.Redis:
    """A client of the Redis `url` names; through Sentinel, a client of the
    current master whose pool asks the sentinels again after a failover."""
    if not is_sentinel(url):
        return redis.Redis.from_url(url, **options)
    address = parse(url)
    connection = {"db": address.db, "password": address.password, "username": address.username}
    if settings.redis_sentinel_tls:
        connection["ssl"] = True
    sentinel = Sentinel(
        address.sentinels,
        sentinel_kwargs=sentinel_kwargs(settings),
        socket_timeout=options.get("socket_timeout", 5),
        **connection,
    )
    return sentinel.master_for(master_name(settings), redis_class=redis.Redis, **options)


def celery_options(settings: Settings, url: str) -> dict[str, Any]:
    """Transport options Celery's Redis transport or result store needs for
    `url`: through Sentinel, the master's name and the sentinels' password."""
    if not is_sentinel(url):
        return {}
    options: dict[str, Any] = {"master_name": master_name(settings)}
    if found := sentinel_kwargs(settings):
        options["sentinel_kwargs"] = found
    return options


def celery_tls(settings: Settings) -> dict[str, Any] | None:
    """Celery's `broker_use_ssl` / `redis_backend_use_ssl` for a TLS Sentinel deployment."""
    return {"ssl_cert_reqs": ssl.CERT_REQUIRED} if settings.redis_sentinel_tls else None


# Connections to Redis of one Runtime, whatever it follows: the listener's
# subscription, the follower's drivers, the offload threads and the caller's own
# threads share them; a caller's thread waits for one when all are in use.
REDIS_CONNECTIONS = 16
REDIS_WAIT_SECONDS = 30.0  # how long a thread waits for a free connection before failing


def client_state(settings: Settings, url: str) -> redis.Redis:
    """The client's Redis: a bounded pool whose threads wait for a free
    connection; through Sentinel, the master's pool (redis-py has no waiting
    Sentinel pool), which follows a failover."""
    name = f"toolrun-client:{os.getpid()}"
    if is_sentinel(url):
        return state_client(settings, url, client_name=name)
    pool = redis.BlockingConnectionPool.from_url(
        url, max_connections=REDIS_CONNECTIONS, timeout=REDIS_WAIT_SECONDS, client_name=name
    )
    return redis.Redis.from_pool(pool)
