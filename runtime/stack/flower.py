"""Flower for the embedded stack: on loopback, behind basic auth."""

from __future__ import annotations

import base64
import json
import logging
import secrets
import sys
import time
import urllib.request

from runtime.errors import StackError
from runtime.settings import Settings
from runtime.stack.environment import child_env
from runtime.stack.processes import free_port, spawn, stop_process, wait_for_basic_auth
from runtime.stack.record import FlowerInfo
from runtime.stack.redis_server import STARTUP_TIMEOUT

FLOWER_MAX_TASKS = 10_000  # tasks Flower keeps in memory (its default: 100,000)
log = logging.getLogger("toolrun.stack")


def start_flower(
    settings: Settings, *, redis_url: str, timeout: float = STARTUP_TIMEOUT
) -> FlowerInfo:
    """Start Flower on loopback behind basic auth; return once it answers 401, then 200.

    The credentials reach Flower as FLOWER_BASIC_AUTH in its environment (Flower
    reads every FLOWER_<option>), so they never show in `ps`.
    """
    user = settings.flower_user
    secret = settings.flower_password
    password = secret.get_secret_value() if secret else secrets.token_urlsafe(16)
    # Flower splits FLOWER_BASIC_AUTH on "," and compares "user:password" whole.
    if ":" in user or "," in user or "," in password:
        raise StackError("TOOLRUN_FLOWER_USER may not hold ':' or ',', nor the password ','")
    port = settings.flower_port or free_port()
    logfile = settings.home.resolve() / "logs" / "flower.log"
    env = {**child_env(settings, redis_url, None), "FLOWER_BASIC_AUTH": f"{user}:{password}"}
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers",
        "flower",
        "--address=127.0.0.1",
        f"--port={port}",
        f"--max_tasks={FLOWER_MAX_TASKS}",
    ]
    pid = spawn(argv, log=logfile, env=env)
    flower = FlowerInfo(url=f"http://127.0.0.1:{port}/", user=user, password=password, pid=pid)
    try:
        wait_for_basic_auth(flower["url"], user, password, pid=pid, log=logfile, timeout=timeout)
    except BaseException:
        stop_process(pid, needles=flower_needles(flower))
        raise
    return flower


def flower_needles(flower: FlowerInfo) -> tuple[str, ...]:
    return ("celery", "flower", f"--port={flower['url'].rstrip('/').rsplit(':', 1)[1]}")


def show_workers(flower: FlowerInfo, names: list[str], *, timeout: float = 15.0) -> bool:
    """Have Flower inspect the workers, once they answer a ping, until it lists
    every one of `names`. Flower inspects them when it starts, before the
    stack's workers answer, and again only when asked (`/api/workers?refresh=1`,
    the workers page's refresh button), so its `/api/workers` stayed `{}`; and
    one inspection waits a second for replies, which a busy worker may miss
    (docs/architecture.md, "What Flower shows"). True once Flower lists them
    all; a Flower that does not only logs it: the stack runs anyway."""
    token = base64.b64encode(f"{flower['user']}:{flower['password']}".encode()).decode()
    request = urllib.request.Request(
        flower["url"] + "api/workers?refresh=1", headers={"Authorization": f"Basic {token}"}
    )
    deadline, shown = time.monotonic() + timeout, set()
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                shown = set(json.loads(answer.read() or b"{}"))
        except (OSError, ValueError) as error:  # urllib.error.HTTPError among them
            log.warning("Flower did not inspect the workers: %s", error)
            return False
        if shown >= set(names):
            return True
        time.sleep(0.5)
    log.warning("Flower lists %s of the workers %s", sorted(shown), sorted(names))
    return False
