"""Fault injection into a real embedded stack: SIGKILL a worker or one of its
pool processes (or the one holding the sweep's lock), restart Redis (with or
without its append-only file), lock the SQLite ledger or cut a TCP relay in
front of PostgreSQL.

Used by `tests/integration/test_faults_*.py` and `python -m tests.soak`. Every
process it signals is one this process started (or a pool process of one).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from sqlalchemy.engine import make_url

from runtime.keyspace.names import SWEEP_LOCK
from runtime.settings import Settings
from runtime.stack.embedded import (
    StackRecord,
    WorkerInfo,
    add_worker,
    start_stack,
    stop_stack,
    stop_worker,
)
from runtime.stack.processes import is_alive, spawn, stop_process, wait_for_redis
from runtime.stack.redis_server import find_redis_server, redis_needles, start_redis
from tests.support.fault_tools import FAULT_TOOLS

log = logging.getLogger("toolrun.faults")
REPO = Path(__file__).resolve().parents[2]


class FaultStack:
    """A stack of its own (Redis, reads and effects workers) that a test may hurt.

    `visibility_timeout` is short, so a SIGKILLed worker's messages come back
    soon; the ledger gives up after `ledger_retry_seconds`, so a cut shows.
    """

    def __init__(
        self,
        home: Path,
        *,
        user_settings: Path,
        visibility_timeout: float = 3.0,
        appendonly: bool = False,
        max_deliveries: int = 3,
        ledger_retry_seconds: float = 1.0,
        reads_workers: int = 1,
        effects_workers: int = 1,
        reads_concurrency: int = 4,
        effects_concurrency: int = 2,
        database_url: str | None = None,
        relay: Relay | None = None,
        batch_timeout: float = 60.0,
        kill_grace: float = 1.0,
        redis_url: str | None = None,
        supervise: bool = False,
        **more: Any,
    ) -> None:
        """`relay`: the TCP relay `database_url` goes through (PostgreSQL), which
        `ledger_cut` cuts; without one the ledger is SQLite and its file is locked.
        `redis_url`: a Redis the test runs (a Sentinel group); None: one of the stack's.
        `supervise`: with the stack's supervisor, which replaces a worker that
        stops answering pings (`runtime.stack.supervisor`)."""
        self.home = Path(home)
        self.relay = relay
        self.appendonly, self.supervise = appendonly, supervise
        self.settings = Settings(
            home=self.home,
            redis_url=None,
            database_url=database_url,
            tool_modules=FAULT_TOOLS,
            user_settings_file=user_settings,
            visibility_timeout=visibility_timeout,
            max_deliveries=max_deliveries,
            ledger_retry_seconds=ledger_retry_seconds,
            reads_concurrency=reads_concurrency,
            effects_concurrency=effects_concurrency,
            batch_timeout=batch_timeout,
            kill_grace=kill_grace,
            **more,  # any other setting (lease_seconds, resend_after)
        )
        self.counts = {"reads": reads_workers, "effects": effects_workers}
        self.env = {"TOOLRUN_TOOL_MODULES": FAULT_TOOLS}
        self.record: StackRecord | None = None
        self.redis_pid: int | None = None
        self.external_redis = redis_url
        self.redis_url = ""
        self.kills = self.restarts = self.cuts = 0
        self._redis: redis.Redis | None = None  # the soak's look at the sweep's lock
        self._cutting, self._cut_depth = threading.Lock(), 0

    def start(self) -> FaultStack:
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.external_redis:
            self.redis_url = self.external_redis
        else:
            self.redis_url, self.redis_pid = start_redis(self.settings, appendonly=self.appendonly)
        self.settings = self.settings.model_copy(update={"redis_url": self.redis_url})
        try:
            self.record = start_stack(
                self.settings,
                flower=False,
                reads_workers=self.counts["reads"],
                effects_workers=self.counts["effects"],
                extra_env=self.env,
                supervise=self.supervise,
            )
        except BaseException:
            self._stop_redis()
            raise
        return self

    def stop(self) -> None:
        """SIGKILL everything: nothing a test stack holds needs a warm shutdown."""
        if self.record is not None:
            for worker in self.record.workers:
                stop_worker(worker, graceful=False)
        stop_stack(self.home)
        self._stop_redis()
        if self._redis is not None:
            self._redis.close()

    def __enter__(self) -> FaultStack:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def client_env(self) -> dict[str, str]:
        """The environment of a client process of this stack (a submitter a
        test or the soak starts): its URLs, tools and timings."""
        settings = self.settings
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
        env |= {
            "TOOLRUN_HOME": str(settings.home),
            "TOOLRUN_REDIS_URL": self.redis_url,
            "TOOLRUN_DATABASE_URL": settings.ledger_url,
            "TOOLRUN_TOOL_MODULES": self.env["TOOLRUN_TOOL_MODULES"],
            "TOOLRUN_USER_SETTINGS_FILE": str(settings.user_settings_file),
            "TOOLRUN_VISIBILITY_TIMEOUT": str(settings.visibility_timeout),
            "TOOLRUN_LEDGER_RETRY_SECONDS": str(settings.ledger_retry_seconds),
            "TOOLRUN_BATCH_TIMEOUT": str(settings.batch_timeout),
            "PYTHONPATH": str(REPO),
        }
        if settings.broker_url:  # RabbitMQ, say: the broker apart from the state's Redis
            env["TOOLRUN_BROKER_URL"] = settings.broker_url
        return env

    def direct_ledger_url(self) -> str:
        """The ledger's URL past the relay (PostgreSQL), which a cut leaves
        reachable: for a fault of another kind, such as a lock holder."""
        url = self.settings.ledger_url
        if self.relay is None:
            return url
        host, port = self.relay.target
        return make_url(url).set(host=host, port=port).render_as_string(hide_password=False)

    def runtime(self):
        from runtime.client import Runtime

        return Runtime(self.settings)

    @contextmanager
    def client(self) -> Iterator[Any]:
        """A client of this stack (a `Runtime`), closed when the block ends."""
        runtime = self.runtime()
        try:
            yield runtime
        finally:
            runtime.close()

    # Workers

    def workers(self, queue: str) -> list[WorkerInfo]:
        """The live workers of `queue`, oldest first."""
        return [w for w in self.record.workers if w["queue"] == queue and is_alive(w["pid"])]

    def add_worker(self, queue: str, env: dict[str, str] | None = None) -> WorkerInfo:
        """One more worker of `queue`; `env`: more of its environment."""
        return add_worker(self.record, self.settings, queue, extra_env=self.env | (env or {}))

    def kill_worker(self, worker: WorkerInfo) -> None:
        """SIGKILL a whole worker: its main process and every pool process (its
        process group, at once: a sweep it holds the lock for lasts milliseconds)."""
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(worker["pid"]) == worker["pid"]:
                os.killpg(worker["pid"], signal.SIGKILL)
        assert stop_worker(worker, graceful=False), f"{worker['name']} survived SIGKILL"
        self.kills += 1

    def kill_pool_process(self, pid: int) -> None:
        """SIGKILL one prefork pool process (a child crash; its worker lives on)."""
        parents = {w["pid"] for w in self.record.workers}
        assert _parent(pid) in parents, f"pid {pid} is not a pool process of this stack"
        os.kill(pid, signal.SIGKILL)
        self.kills += 1

    def pool_processes(self, worker: WorkerInfo) -> list[int]:
        return [pid for pid in _pids() if _parent(pid) == worker["pid"]]

    def sweep_holder(self) -> tuple[str, WorkerInfo | None] | None:
        """Who holds the sweep's lock now: its value, and the live worker of
        this stack that value names (None: not one of ours, or already dead);
        None if nobody holds it."""
        if self._redis is None:
            self._redis = redis.Redis.from_url(self.redis_url, socket_timeout=2)
        value = self._redis.get(SWEEP_LOCK)
        if value is None:
            return None
        holder = value.decode()
        return holder, holder_worker(holder, self.workers("reads") + self.workers("effects"))

    def keep_workers(self, queue: str, count: int = 1) -> Supervisor:
        """Start a replacement whenever a worker of `queue` dies (a restart policy)."""
        return Supervisor(self, queue, count)

    # Redis

    def restart_redis(self, down: float = 0.5, *, crash: bool = False) -> None:
        """Stop Redis (SIGTERM: with append-only on it writes its file first;
        `crash`: SIGKILL), leave it down for `down` seconds, start it again on
        the same config."""
        with self.redis_down(crash=crash):
            time.sleep(down)

    @contextmanager
    def redis_down(self, *, crash: bool = False) -> Iterator[None]:
        """Redis stopped (as `restart_redis` stops it) until the block ends,
        then started again on the same config: a test does what it must while
        Redis is away, and every process of the stack finds it back."""
        needles = redis_needles(self.redis_url)
        stopped = stop_process(self.redis_pid, needles=needles, timeout=10, graceful=not crash)
        assert stopped, "Redis did not stop"
        try:
            yield
        finally:
            config = self.home.resolve() / "redis" / "redis.conf"
            log = self.home.resolve() / "logs" / "redis.log"
            binary = find_redis_server(self.settings)
            self.redis_pid = spawn([binary, str(config)], log=log, env=os.environ)
            wait_for_redis(self.redis_url, pid=self.redis_pid, log=log, timeout=30)
            self.restarts += 1

    def _stop_redis(self) -> None:
        if self.redis_pid is not None:
            stop_process(self.redis_pid, needles=redis_needles(self.redis_url))
            self.redis_pid = None

    # The ledger

    @contextmanager
    def ledger_cut(self) -> Iterator[None]:
        """The ledger is unreachable until the block ends: the relay in front of
        PostgreSQL refuses connections, or a test connection holds SQLite's write lock."""
        self.cuts += 1
        if self.relay is None:
            with locked_sqlite(self.settings.ledger_url):
                yield
            return
        with self._cutting:  # cuts may overlap (the soak's faults): the last one restores
            self._cut_depth += 1
            if self._cut_depth == 1:
                self.relay.cut()
        try:
            yield
        finally:
            with self._cutting:
                self._cut_depth -= 1
                if self._cut_depth == 0:
                    self.relay.restore()


class Supervisor:
    """Keeps `count` workers of a queue alive, as a container restart policy would."""

    def __init__(self, stack: FaultStack, queue: str, count: int) -> None:
        self.stack, self.queue, self.count = stack, queue, count
        self.started: list[WorkerInfo] = []
        self.spawned = 0  # workers it started, with those that died before they were ready
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="supervisor", daemon=True)

    def __enter__(self) -> Supervisor:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            if len(self.stack.workers(self.queue)) >= self.count:
                continue
            try:
                self.spawned += 1  # a redelivered message may kill it before it is ready
                self.started.append(self.stack.add_worker(self.queue))
            except Exception as error:  # noqa: BLE001 - Redis restarting, say: try again
                log.warning("supervisor: no new %s worker yet: %s", self.queue, error)
                self._stop.wait(1.0)


def holder_worker(holder: str, workers: list[WorkerInfo]) -> WorkerInfo | None:
    """The worker a sweep lock's value names: the one place that knows its
    format (`host:pid:nonce`, runtime/worker/sweeper.py); a worker's Celery
    name anywhere in the value names it too."""
    fields = holder.split(":")
    pid = fields[1] if len(fields) == 3 else None
    for worker in workers:
        if str(worker["pid"]) == pid or worker["name"] in holder:
            return worker
    return None


@contextmanager
def locked_sqlite(url: str) -> Iterator[None]:
    """Hold the write lock of a SQLite database (`BEGIN EXCLUSIVE`; in WAL mode
    readers still read) until the block ends."""
    path = make_url(url).database
    connection = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        connection.execute("BEGIN EXCLUSIVE")
        yield
        connection.execute("ROLLBACK")
    finally:
        connection.close()


class Relay:
    """A TCP relay on loopback in front of a server (PostgreSQL): `cut()` drops
    every connection and refuses new ones until `restore()`, on the same port."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._server: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.restore()

    @classmethod
    def in_front_of(cls, url: str) -> tuple[Relay, str]:
        """A relay to the server of a database URL, and the URL through it."""
        parsed = make_url(url)
        relay = cls(parsed.host or "127.0.0.1", parsed.port or 5432)
        through = parsed.set(host="127.0.0.1", port=relay.port)
        return relay, through.render_as_string(hide_password=False)

    def restore(self) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self.port = server.getsockname()[1]
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def cut(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            _close(server)
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _close(sock)

    close = cut

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                downstream, _ = server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(downstream)
                continue
            with self._lock:
                if self._server is not server:
                    _close(downstream)
                    _close(upstream)
                    return
                self._sockets |= {downstream, upstream}
            for a, b in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _parent(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(raw[raw.rfind(")") + 2 :].split()[1])
