"""Whether the deployment a process would use answers at all, asked once with a
short timeout, so that a command against a dead or mistyped stack fails in
seconds with one line naming what does not answer and what to run, instead of
retrying for the length of a batch (docs/architecture.md, "Failing fast").

Celery's own answer to an unreachable broker is the model: `OperationalError`
at once, not a wait.
"""

from __future__ import annotations

import redis
from kombu import Connection
from redis.backoff import NoBackoff
from redis.retry import Retry

from runtime import config
from runtime.errors import StackError
from runtime.settings import Settings
from runtime.transport.redis_client import is_sentinel, parse, state_client

SECONDS = 3.0  # how long one PING may take before the deployment counts as unreachable


def address(url: str) -> str:
    """host:port of a Redis (or broker) URL; its password stays off the screen."""
    if is_sentinel(url):
        return ",".join(f"{host}:{port}" for host, port in parse(url).sentinels)
    found = redis.connection.parse_url(url) if url.startswith(("redis", "unix")) else {}
    if "path" in found:
        return found["path"]
    if not found:  # a broker URL of another kind (amqp://user:pw@host:port/vhost)
        rest = url.split("://", 1)[-1].rsplit("@", 1)[-1]
        return rest.split("/", 1)[0] or "?"
    return f"{found.get('host', 'localhost')}:{found.get('port', 6379)}"


def require_reachable(settings: Settings, *, seconds: float = SECONDS) -> str:
    """The state's Redis URL, once it (and a broker of its own, if set) answered
    within `seconds`; else StackError saying which does not answer and what to do."""
    url = config.redis_url(settings)
    client = state_client(
        settings,
        url,
        socket_connect_timeout=seconds,
        socket_timeout=seconds,
        retry=Retry(NoBackoff(), 0),  # asked once: the caller wants an answer, not a wait
    )
    try:
        client.ping()
    except redis.AuthenticationError as error:
        raise StackError(f"Redis at {address(url)} refused the password: {error}") from error
    except (redis.RedisError, OSError) as error:
        raise StackError(_unanswered(settings, "Redis", url, error)) from error
    finally:
        client.close()
    broker = config.broker_url(settings, state_url=url)
    if broker != url and not is_sentinel(broker):
        _require_broker(settings, broker, seconds)
    return url


def _require_broker(settings: Settings, url: str, seconds: float) -> None:
    connection = Connection(url, connect_timeout=seconds)
    try:
        connection.ensure_connection(max_retries=0)  # once: kombu's default retries forever
    except Exception as error:  # kombu raises its transport's own errors
        raise StackError(_unanswered(settings, "the broker", url, error)) from error
    finally:
        connection.release()


def _unanswered(settings: Settings, what: str, url: str, error: BaseException) -> str:
    said = " ".join(str(error).split()) or type(error).__name__
    if what == "Redis" and not settings.redis_url:
        record = settings.home.resolve() / config.STACK_RECORD
        return (
            f"the stack recorded in {record} is down: its Redis at {address(url)} does not "
            f"answer ({said}); run `toolrun up`"
        )
    setting = "TOOLRUN_REDIS_URL" if what == "Redis" else "TOOLRUN_BROKER_URL"
    return (
        f"{what} at {address(url)} ({setting}) does not answer ({said}); "
        f"start it, or correct {setting}"
    )
