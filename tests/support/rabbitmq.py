"""RabbitMQ for the tests that run with it as the broker: `TOOLRUN_TEST_AMQP_URL`
names a server (`.ci/run` sets it to this machine's); each stack gets a vhost
of its own there, made with `rabbitmqctl` and deleted afterwards, so its
queues neither see nor leave anything else's. Without the variable those
tests skip and say so.

`BROKERS` parametrizes a stack fixture by broker: `redis` (the default, one
Redis for everything) and `amqp`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import pytest

AMQP_ENV = "TOOLRUN_TEST_AMQP_URL"
SKIP_REASON = f"{AMQP_ENV} is not set: the RabbitMQ runs of this test are skipped"
BROKERS = [
    "redis",
    pytest.param(
        "amqp",
        marks=pytest.mark.skipif(not os.environ.get(AMQP_ENV), reason=SKIP_REASON),
    ),
]
CTL_TIMEOUT = 60.0  # rabbitmqctl starts an Erlang VM per command: seconds, on a busy machine


def amqp_url() -> str | None:
    return os.environ.get(AMQP_ENV) or None


def with_vhost(url: str, vhost: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(vhost, safe="")))


def _ctl(*args: str) -> None:
    subprocess.run(
        ["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=CTL_TIMEOUT
    )


@contextmanager
def own_vhost(url: str) -> Iterator[str]:
    """`url` on a fresh vhost of this test's, granted to the URL's user and
    deleted on the way out. Without `rabbitmqctl` (a remote server), `url`
    as given: its vhost is then the tests' to share."""
    if shutil.which("rabbitmqctl") is None:
        yield url
        return
    vhost = f"toolrun-test-{uuid.uuid4().hex[:8]}"
    user = unquote(urlsplit(url).username or "guest")
    _ctl("add_vhost", vhost)
    try:
        _ctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")
        yield with_vhost(url, vhost)
    finally:
        _ctl("delete_vhost", vhost)


@contextmanager
def broker_for(kind: str) -> Iterator[str | None]:
    """The broker URL of a stack parametrized by `BROKERS`: None for Redis
    (the stack's own), an amqp:// URL on a vhost of its own for RabbitMQ."""
    if kind == "redis":
        yield None
        return
    url = amqp_url()
    if url is None:
        pytest.skip(SKIP_REASON)
    with own_vhost(url) as own:
        yield own
