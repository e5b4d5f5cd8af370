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
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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


def can_run_a_node() -> bool:
    """Whether a test may start a RabbitMQ node of its own: the server is
    installed, and as root its `rabbitmq` user exists (the start script runs
    the node as that user)."""
    if shutil.which("rabbitmq-server") is None:
        return False
    if os.geteuid() != 0:
        return True
    try:
        pwd.getpwnam("rabbitmq")
    except KeyError:
        return False
    return True


class RabbitNode:
    """A RabbitMQ node of the test's own (`rabbitmq-server`), on free ports,
    with its data in a directory of its own under the system's temp directory
    (the node runs as `rabbitmq`, which cannot enter pytest's private ones):
    `stop` and `start` again keep its queues and their messages, as a broker
    restart does; `remove` deletes the data. The machine's node is not touched
    (another node name, other ports, another data directory)."""

    def __init__(self) -> None:
        from runtime.stack.processes import free_port

        self.home = Path(tempfile.mkdtemp(prefix="toolrun-rabbit-"))
        self.port, self.dist_port = free_port(), free_port()
        self.name = f"toolrun{uuid.uuid4().hex[:8]}@localhost"
        self.pid: int | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def _env(self) -> dict[str, str]:
        home = self.home
        return {
            **os.environ,
            "RABBITMQ_CONF_ENV_FILE": str(home / "env.conf"),  # not the machine's
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(home / "log"),
            "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_FEATURE_FLAGS_FILE": str(home / "feature_flags"),
            "RABBITMQ_PID_FILE": str(home / "pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    def start(self, timeout: float = 90.0) -> RabbitNode:
        from runtime.stack.processes import spawn

        for folder in ("mnesia", "log"):
            (self.home / folder).mkdir(parents=True, exist_ok=True)
        (self.home / "enabled_plugins").write_text("[].\n")
        (self.home / "rabbitmq.conf").write_text(f"listeners.tcp.local = 127.0.0.1:{self.port}\n")
        (self.home / "env.conf").write_text(
            'export ERL_FLAGS="-kernel inet_dist_use_interface {127,0,0,1}"\n'
        )
        if os.geteuid() == 0:  # the start script runs the node as `rabbitmq`
            user = pwd.getpwnam("rabbitmq")
            for path in [self.home, *self.home.rglob("*")]:
                os.chown(path, user.pw_uid, user.pw_gid)
        self.pid = spawn(["rabbitmq-server"], log=self.home / "out.log", env=self._env())
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"RabbitMQ did not start: {self.home}/out.log") from None
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop the node cleanly (`rabbitmqctl stop`: its data kept) and wait
        until its processes are gone. As root the start script runs the node
        in a session of its own, as `rabbitmq`, so they are found by the
        node's unique name in their environment; any left are SIGKILLed."""
        from runtime.stack.processes import stop_process

        if self.pid is None:
            return
        subprocess.run(
            ["rabbitmqctl", "-q", "-n", self.name, "stop"],
            capture_output=True,
            timeout=CTL_TIMEOUT,
            check=False,
        )
        deadline = time.monotonic() + 30
        while self._processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in self._processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stop_process(self.pid, needles=(), timeout=5)  # the script we spawned, reaped
        self.pid = None

    def _processes(self) -> list[int]:
        """The pids of this node's processes (its name is in their environment)."""
        marker = f"RABBITMQ_NODENAME={self.name}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)
