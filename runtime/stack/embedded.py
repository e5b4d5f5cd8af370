"""The embedded stack: a private redis-server, workers and Flower on loopback.

`toolrun up`, `make demo` and the test suite start it; `toolrun down` stops it.
What was started is written to `<home>/stack.json` (mode 0600: it holds the
Redis and Flower passwords), so that another process can stop exactly that.
The record is `runtime.stack.record`, Redis is `runtime.stack.redis_server`; both are
re-exported here. Which Redis a process uses is `runtime.config`'s to say.
"""

from __future__ import annotations

import secrets
import socket
import sys
import uuid
from pathlib import Path

from pydantic import SecretStr

from runtime.errors import StackError
from runtime.keyspace.names import EFFECTS, READS
from runtime.ledger import schema
from runtime.settings import Settings
from runtime.stack.environment import child_env
from runtime.stack.flower import flower_needles, show_workers, start_flower
from runtime.stack.gateway import needles as gateway_needles
from runtime.stack.gateway import start_gateway
from runtime.stack.processes import (
    Target,
    owns,
    spawn,
    stop_process,
    stop_processes,
    wait_for_redis,
    wait_for_workers,
)
from runtime.stack.record import (
    RECORD,
    FlowerInfo,
    StackRecord,
    WorkerInfo,
    load_record,
)
from runtime.stack.redis_server import (
    STARTUP_TIMEOUT,
    find_redis_server,
    redis_needles,
    start_redis,
)
from runtime.transport.app import make_app
from runtime.transport.redis_client import is_sentinel

__all__ = [
    "RECORD",
    "STARTUP_TIMEOUT",
    "FlowerInfo",
    "StackRecord",
    "WorkerInfo",
    "add_worker",
    "find_redis_server",
    "is_running",
    "load_record",
    "start_flower",
    "start_redis",
    "start_stack",
    "start_worker",
    "stop_stack",
    "stop_worker",
]


def start_worker(
    settings: Settings,
    queue: str,
    *,
    redis_url: str,
    index: int = 1,
    concurrency: int | None = None,
    extra_env: dict[str, str] | None = None,
    wait: bool = True,
    timeout: float = STARTUP_TIMEOUT,
) -> WorkerInfo:
    """Start a Celery worker on `queue`, on the prefork pool: a call's process
    can be killed at its hard limit and replaced (docs/architecture.md,
    "Stopping a call")."""
    pool = "prefork"
    if concurrency is None:
        concurrency = settings.reads_concurrency if queue == READS else settings.effects_concurrency
    stem = f"{queue}-{index}-{uuid.uuid4().hex[:6]}"
    name = f"{stem}@{socket.gethostname()}"
    log = settings.home.resolve() / "logs" / f"{stem}.log"
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers",
        "worker",
        "-Q",
        queue,
        "-P",
        pool,
        "-c",
        str(concurrency),
        "-n",
        name,
        "-E",
        "--without-mingle",  # docs/architecture.md, "Traps found on the way"
        "--loglevel",
        settings.log_level,
    ]
    pid = spawn(argv, log=log, env=child_env(settings, redis_url, extra_env))
    worker = WorkerInfo(name=name, queue=queue, pid=pid, log=str(log))
    if wait:
        try:
            _wait_for_workers(settings, redis_url, [worker], timeout=timeout)
        except BaseException:
            stop_worker(worker)
            raise
    return worker


def add_worker(record: StackRecord, settings: Settings, queue: str, **options) -> WorkerInfo:
    """Start one more worker for a running stack and record it, so `stop_stack` stops it."""
    index = 1 + sum(worker["queue"] == queue for worker in record.workers)
    worker = start_worker(settings, queue, redis_url=record.redis_url, index=index, **options)
    record.workers.append(worker)
    record.save()
    if record.flower and options.get("wait", True):
        show_workers(record.flower, [w["name"] for w in record.workers])
    return worker


def stop_worker(worker: WorkerInfo, *, graceful: bool = True, timeout: float = 10.0) -> bool:
    """Stop one worker: warm shutdown, or SIGKILL at once to simulate a crash."""
    return stop_process(
        worker["pid"], needles=_worker_needles(worker), timeout=timeout, graceful=graceful
    )


def start_stack(
    settings: Settings,
    *,
    flower: bool = True,
    reads_workers: int = 1,
    effects_workers: int = 1,
    extra_env: dict[str, str] | None = None,
    redis_server: str | None = None,
    supervise: bool = False,
    gateway: bool = False,
) -> StackRecord:
    """Migrate the ledger, then start Redis (unless TOOLRUN_REDIS_URL names one),
    workers and Flower; record them. `supervise`: and a supervisor that
    restarts a worker that dies or stops answering (`runtime.stack.supervisor`);
    `gateway`: and the HTTP gateway (`toolrun serve`) on loopback.

    Returns once every part answers. If a part fails, what was started is
    stopped again and StackError says which part and quotes its log.
    """
    home = settings.home.resolve()
    settings = _claim_home(settings, home)
    schema.upgrade(settings.ledger_url)  # before any worker opens the ledger
    started: list[Target] = []
    try:
        redis_url, redis_pid = _redis(settings, redis_server, started)
        record = StackRecord(
            home,
            redis_url,
            settings.ledger_url,
            redis_pid,
            signing_key=settings.signing_key.get_secret_value(),
            broker_url=settings.broker_url,
        )
        counts = {READS: reads_workers, EFFECTS: effects_workers}
        _start_workers(record, settings, counts, extra_env, started)
        if flower:
            record.flower = start_flower(settings, redis_url=redis_url)
            started.append((record.flower["pid"], flower_needles(record.flower)))
        _wait_for_workers(settings, redis_url, record.workers, timeout=STARTUP_TIMEOUT)
        if record.flower:
            show_workers(record.flower, [w["name"] for w in record.workers])
        if gateway:
            env = child_env(settings, redis_url, extra_env)
            record.gateway = start_gateway(settings, env=env, timeout=STARTUP_TIMEOUT)
            started.append((record.gateway["pid"], gateway_needles(record.gateway)))
        record.save()
        if supervise:
            _start_supervisor(record, settings, extra_env, started)
        return record
    except BaseException as error:
        stop_processes(reversed(started))
        if isinstance(error, Exception) and not isinstance(error, StackError):
            raise StackError(f"the embedded stack did not start: {error}") from error
        raise


def _claim_home(settings: Settings, home: Path) -> Settings:
    """`home` made ready for a new stack: a dead stack's leftovers stopped and
    its record removed (a live one is a StackError); `settings` with a fresh
    signing key, which this stack's client and workers share, unless set."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    if settings.signing_key is None:
        settings = settings.model_copy(update={"signing_key": SecretStr(secrets.token_urlsafe(32))})
    running = load_record(home)
    if running is not None:
        if is_running(running):
            raise StackError(f"a stack is already running under {home}; run `toolrun down`")
        stop_stack(home)
    return settings


def _redis(settings: Settings, server: str | None, started: list[Target]) -> tuple[str, int | None]:
    """The stack's Redis: the one TOOLRUN_REDIS_URL names, once it answers, or
    a private one started here (its URL and pid)."""
    if not settings.redis_url:
        redis_url, redis_pid = start_redis(settings, server=server)
        started.append((redis_pid, redis_needles(redis_url)))
        return redis_url, redis_pid
    if not is_sentinel(settings.redis_url):  # through Sentinel: the workers find the master
        wait_for_redis(settings.redis_url, pid=None, log=None, timeout=STARTUP_TIMEOUT)
    return settings.redis_url, None


def _start_workers(
    record: StackRecord,
    settings: Settings,
    counts: dict[str, int],
    extra_env: dict[str, str] | None,
    started: list[Target],
) -> None:
    """`counts[queue]` workers of each queue, started without waiting for them."""
    for queue, count in counts.items():
        for index in range(1, count + 1):
            worker = start_worker(
                settings,
                queue,
                redis_url=record.redis_url,
                index=index,
                extra_env=extra_env,
                wait=False,
            )
            record.workers.append(worker)
            started.append((worker["pid"], _worker_needles(worker)))


def _start_supervisor(
    record: StackRecord,
    settings: Settings,
    extra_env: dict[str, str] | None,
    started: list[Target],
) -> None:
    """The supervisor that restarts a worker that dies or stops answering."""
    log = record.home / "logs" / "supervisor.log"
    argv = [sys.executable, "-m", "runtime.stack.supervisor", str(record.home)]
    env = child_env(settings, record.redis_url, extra_env)
    record.supervisor_pid = spawn(argv, log=log, env=env)
    started.append((record.supervisor_pid, _supervisor_needles(record.home)))
    record.save()


def is_running(record: StackRecord) -> bool:
    """Whether the recorded stack still runs: its Redis, when it started one, and
    any other of its processes (a stack whose processes were killed leaves its
    record behind; without its Redis, what is left of it is of no use)."""
    targets = _targets(record)
    if record.redis_pid and not owns(*targets[-1]):
        return False
    return any(owns(pid, needles) for pid, needles in targets)


def stop_stack(home: Path) -> bool:
    """Stop the processes recorded under `home` and remove the record; False if none."""
    record = load_record(home)
    if record is None:
        return False
    if record.supervisor_pid:  # first, so that it starts no worker while they stop
        stop_process(record.supervisor_pid, needles=_supervisor_needles(Path(home).resolve()))
        record = load_record(home) or record  # with the workers it started
    targets = _targets(record)
    # Flower and the workers first, together; Redis last, so workers can shut down warmly.
    stop_processes(targets[:-1] if record.redis_pid else targets)
    if record.redis_pid:
        stop_processes(targets[-1:])
    (Path(home) / RECORD).unlink(missing_ok=True)
    return True


def _targets(record: StackRecord) -> list[Target]:
    """Flower, the gateway, the workers, then Redis, each with what its command line must show."""
    targets: list[Target] = []
    if record.supervisor_pid:
        targets.append((record.supervisor_pid, _supervisor_needles(Path(record.home).resolve())))
    if record.flower:
        targets.append((record.flower["pid"], flower_needles(record.flower)))
    if record.gateway:
        targets.append((record.gateway["pid"], gateway_needles(record.gateway)))
    targets += [(worker["pid"], _worker_needles(worker)) for worker in record.workers]
    if record.redis_pid:
        targets.append((record.redis_pid, redis_needles(record.redis_url)))
    return targets


def _worker_needles(worker: WorkerInfo) -> tuple[str, ...]:
    return ("celery", worker["name"])


def _supervisor_needles(home: Path) -> tuple[str, ...]:
    return ("runtime.stack.supervisor", str(home))


def _wait_for_workers(
    settings: Settings, redis_url: str, workers: list[WorkerInfo], *, timeout: float
) -> None:
    app = make_app(settings, redis_url=redis_url)
    try:
        wait_for_workers(app, workers, timeout=timeout)
    finally:
        app.close()
