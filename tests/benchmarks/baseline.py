"""The bare Celery baseline: what a user wires by hand instead of toolrun.

Its tasks have the bodies of `tools.py` and no lookup, validation, permission
gate, ledger or redaction; results go through Celery's Redis result backend
(`delay().get()`, `group(...).get()`, `chain(...).get()`). The delivery and
serialization settings are copied from toolrun's app (`shared_conf`) and handed
to the worker in its environment, so both sides run with the same ones. The
worker imports this module only: no toolrun signal handlers ride along.

    celery -A tests.benchmarks.baseline worker -Q baseline.reads -P prefork -c 16
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path

from celery import Celery

READS_QUEUE, EFFECTS_QUEUE = "baseline.reads", "baseline.effects"
URL_ENV, CONF_ENV = "BENCH_BASELINE_REDIS_URL", "BENCH_BASELINE_CONF"
BROKER_ENV = "BENCH_BASELINE_BROKER_URL"  # Celery's broker, when not the Redis of the results
# toolrun's settings that a hand-wired app would share; results and routing are the baseline's own.
SHARED = (
    "task_serializer",
    "result_serializer",
    "accept_content",
    "result_accept_content",
    "worker_send_task_events",
    "task_send_sent_event",
    "task_acks_late",
    "task_reject_on_worker_lost",
    "worker_prefetch_multiplier",
    "broker_transport_options",
    "broker_connection_retry_on_startup",
    "worker_redirect_stdouts",
    "worker_redirect_stdouts_level",
)


def make_app(redis_url: str, conf: dict | None = None, broker_url: str | None = None) -> Celery:
    app = Celery("baseline", broker=broker_url or redis_url, backend=redis_url)
    app.conf.update(conf or {})
    app.conf.update(
        task_ignore_result=False,
        task_default_queue=READS_QUEUE,
        task_routes={"baseline.write": {"queue": EFFECTS_QUEUE}},
    )
    return app


def shared_conf(toolrun_app: Celery) -> dict:
    """The settings of toolrun's app that the baseline runs with too."""
    return json.loads(json.dumps({key: toolrun_app.conf[key] for key in SHARED}))


app = make_app(
    os.environ.get(URL_ENV, "redis://127.0.0.1:6379/0"),
    json.loads(os.environ.get(CONF_ENV, "{}")),
    os.environ.get(BROKER_ENV) or None,
)


@app.task(name="baseline.noop")
def noop() -> str:
    return "ok"


@app.task(name="baseline.sleep")
def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "ok"


@app.task(name="baseline.write")
def write() -> str:
    return "ok"


def start_worker(
    home: Path,
    redis_url: str,
    conf: dict,
    queue: str,
    *,
    concurrency: int,
    index: int = 1,
    broker_url: str | None = None,
) -> dict:
    """Spawn a bare worker on `queue` with toolrun's pool for that kind of queue
    (prefork on both queues), without waiting for it."""
    from runtime.stack.processes import spawn

    pool = "prefork"
    stem = f"{queue}-{index}-{uuid.uuid4().hex[:6]}"
    name = f"{stem}@{socket.gethostname()}"
    log = home / "logs" / f"{stem}.log"
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        __name__,
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
        "--loglevel",
        "INFO",
    ]
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLRUN_")}
    env |= {URL_ENV: redis_url, CONF_ENV: json.dumps(conf), BROKER_ENV: broker_url or ""}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    pid = spawn(argv, log=log, env=env)
    return {"name": name, "queue": queue, "pid": pid, "log": str(log), "pool": pool}


def wait_for(client_app: Celery, workers: list[dict], timeout: float = 60.0) -> None:
    from runtime.stack.processes import wait_for_workers

    wait_for_workers(client_app, workers, timeout=timeout)


def stop(workers: list[dict]) -> None:
    from runtime.stack.processes import stop_processes

    stop_processes([(worker["pid"], ("celery", worker["name"])) for worker in workers])
