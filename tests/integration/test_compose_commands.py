"""The compose file's own commands, run here without Docker: its Redis command,
its migration, its reads and effects workers and its Flower, with the env file
the repository ships (.env.example), its change-me secrets replaced as a user
replaces them (they stop every service as they are). Only the addresses and
paths change: Redis listens on a free loopback port with the config file
compose would write, the org policy is read from compose/, and the ledger is a
fresh PostgreSQL database when TOOLRUN_TEST_POSTGRES_URL names a server, else a
SQLite file. Then a batch is
served through them, and the workers' healthchecks and JSON logs are checked."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis

from runtime.ledger import schema
from runtime.settings import Settings
from runtime.stack import processes
from runtime.types import Status
from tests.conftest import TEST_TOOLS
from tests.support import compose
from tests.support.postgres import fresh_database
from tests.support.tools import marks
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)
WRITES = {"allow": ["bump", "write_file"]}


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    """The shipped env file, its placeholders replaced, with the test tools registered."""
    shipped = compose.env_file()
    chosen = {k: secrets.token_urlsafe(16) for k, v in shipped.items() if v.startswith("change-me")}
    return {**shipped, **chosen, "TOOLRUN_TOOL_MODULES": TEST_TOOLS}


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    url = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
    if not url:
        yield f"sqlite:///{tmp_path_factory.mktemp('compose-ledger') / 'ledger.db'}"
        return
    with fresh_database(url) as fresh:
        yield fresh


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """Spawn a service's command; everything spawned is stopped at the end."""
    root = tmp_path_factory.mktemp("compose-run")
    children: list[processes.Target] = []

    def start(argv: list[str], name: str, env: dict[str, str]) -> tuple[int, Path]:
        log = root / "logs" / f"{name}.log"
        pid = processes.spawn(argv, log=log, env=env)
        children.append((pid, (Path(argv[0]).name,)))
        return pid, log

    start.root = root
    yield start
    processes.stop_processes(reversed(children))


@pytest.fixture(scope="module")
def redis_url(started, env):
    """The compose Redis command, on a free loopback port and a scratch directory."""
    redis_service = compose.service("redis", env)
    directory = started.root / "redis"
    directory.mkdir()
    [config] = redis_service["configs"]  # what compose writes, from compose/.env
    content = compose.interpolate(compose.load()["configs"][config["source"]]["content"], env)
    (directory / "auth.conf").write_text(content)
    command = [
        directory / "auth.conf" if a == config["target"] else a for a in redis_service["command"]
    ]
    port = processes.free_port()
    argv = [
        *compose.local_argv(list(map(str, command))),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
    ]
    pid, log = started([*argv, "--dir", str(directory)], "redis", os.environ.copy())
    url = f"redis://:{env['REDIS_PASSWORD']}@127.0.0.1:{port}/0"
    processes.wait_for_redis(url, pid=pid, log=log, timeout=30)
    with pytest.raises(redis.AuthenticationError):  # the config file's password holds
        redis.Redis.from_url(f"redis://127.0.0.1:{port}/0").ping()
    return url


def service_env(name: str, env: dict[str, str], redis_url: str, database: str, home: Path):
    """What the container would see, pointed at this machine's Redis and ledger."""
    environment = compose.environment(compose.service(name, env))
    assert environment["TOOLRUN_REDIS_URL"].startswith(f"redis://:{env['REDIS_PASSWORD']}@")
    environment["TOOLRUN_REDIS_URL"] = redis_url
    if "TOOLRUN_DATABASE_URL" in environment:  # not Flower's
        environment["TOOLRUN_DATABASE_URL"] = database
    if "TOOLRUN_POLICY_FILE" in environment:  # mounted from compose/ in the container
        environment["TOOLRUN_POLICY_FILE"] = str(compose.COMPOSE / "policy.json")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLRUN_", "FLOWER_"))}
    # The image installs the package and sets TOOLRUN_HOME; here the repository is the package.
    return base | environment | {"TOOLRUN_HOME": str(home), "PYTHONPATH": str(compose.REPO)}


@pytest.fixture(scope="module")
def deployment(started, env, redis_url, database):
    """Migrate with the `migrate` command, then start both worker services."""
    home = started.root / "home"
    run = {"cwd": started.root, "capture_output": True, "text": True, "timeout": 60}
    migrate = compose.service("migrate", env)["command"]
    migrate_env = service_env("migrate", env, redis_url, database, home)
    for _ in range(2):  # a second run finds nothing to do
        done = subprocess.run(compose.local_argv(migrate), env=migrate_env, **run)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"at revision {schema.head()}" in done.stdout

    workers = []
    for name in ("reads", "effects"):
        argv = compose.local_argv(compose.service(name, env)["command"])
        environment = service_env(name, env, redis_url, database, home)
        pid, log = started(argv, name, environment)
        node = f"{name}@{socket.gethostname()}"  # what --hostname=<queue>@%h becomes
        workers.append({"name": node, "queue": name, "pid": pid, "log": str(log)})

    from workers.app import make_app

    settings = Settings(home=home, redis_url=redis_url, database_url=database)
    app = make_app(settings, redis_url=redis_url)
    try:
        processes.wait_for_workers(app, workers, timeout=40)
    finally:
        app.close()
    return {"workers": workers, "home": home, "database": database, "redis_url": redis_url}


def test_the_redis_command_keeps_data_and_never_evicts(redis_url, env):
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    finally:
        client.close()
    anonymous = redis.Redis.from_url(redis_url.replace(env["REDIS_PASSWORD"], ""))
    with pytest.raises(redis.AuthenticationError):
        anonymous.ping()


def test_the_migration_brings_the_ledger_to_the_models(deployment):
    assert schema.current(deployment["database"]) == schema.head()
    assert schema.differences(deployment["database"]) == []


def test_the_worker_services_serve_a_batch(deployment, env, user_settings, workspace):
    from runtime.client import Runtime

    settings = Settings(
        home=deployment["home"] / "client",
        redis_url=deployment["redis_url"],
        database_url=deployment["database"],
        tool_modules=TEST_TOOLS,
        signing_key=env["TOOLRUN_SIGNING_KEY"],
        user_settings_file=user_settings,
    )
    batch = [
        {"id": "n1", "name": "nap", "arguments": {"label": "a", "seconds": 0.2}},
        {"id": "n2", "name": "nap", "arguments": {"label": "b", "seconds": 0.2}},
        {"id": "w", "name": "write_file", "arguments": {"path": "x.txt", "content": "hi"}},
        {"id": "r", "name": "read_file", "arguments": {"path": "x.txt"}},
        {"id": "b", "name": "bump", "arguments": {"label": "once"}},
    ]
    runtime = Runtime(settings)
    try:
        handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=WRITES)
        results = handle.results(timeout=30)
    finally:
        runtime.close()
    assert all(r.status is Status.ok for r in results), [r.model_message for r in results]
    nodes = {worker["queue"]: worker["name"] for worker in deployment["workers"]}
    assert [r.worker for r in results] == [nodes["reads"]] * 2 + [
        nodes["effects"],
        nodes["reads"],
        nodes["effects"],
    ]
    assert "hi" in results[3].content["text"]
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["once"]

    # TOOLRUN_LOG_FORMAT defaults to json in the compose file: one object a line,
    # and Celery's lines about each task name its batch and call. A task logs
    # "succeeded" just after it publishes its result, so wait for the last ones.
    every_call = {"n1", "n2", "w", "r", "b"}

    def all_succeeded():
        about = lines_about(deployment["workers"], handle.batch_id)
        ended = {call_id for call_id, said in about.items() if any("succeeded" in m for m in said)}
        return about if ended == every_call else None

    about = wait_for(all_succeeded, 10, "'succeeded' line of every call", every=0.1)
    assert set(about) == every_call
    for call_id, messages in about.items():
        assert any("received" in m for m in messages), (call_id, messages)
        assert any("succeeded" in m for m in messages), (call_id, messages)


def lines_about(workers: list[dict], batch_id: str) -> dict[str, list[str]]:
    """The messages of the workers' JSON log records about each call of a batch."""
    about: dict[str, list[str]] = {}
    for worker in workers:
        text = Path(worker["log"]).read_text()
        assert "[tasks]" not in text  # no banner: it is printed, not logged
        assert not re.search(r"^\[\d{4}-\d\d-\d\d [^]]*: (INFO|WARNING|ERROR)/", text, re.M)
        # Every log record is JSON; the rest is what Python or Celery printed
        # (a warning for root, which the image never is; the shutdown notice).
        for line in (line for line in text.splitlines() if line.startswith("{")):
            entry = json.loads(line)
            assert {"time", "level", "logger", "message"} <= set(entry), line
            if entry.get("batch_id") == batch_id:
                about.setdefault(entry["call_id"], []).append(entry["message"])
    return about


def test_the_worker_healthchecks_pass(deployment, env):
    checks = []
    for worker in deployment["workers"]:
        test = compose.service(worker["queue"], env)["healthcheck"]["test"]
        assert test[0] == "CMD-SHELL"
        environment = service_env(
            worker["queue"], env, deployment["redis_url"], deployment["database"], Path("/tmp")
        )
        environment["HOSTNAME"] = socket.gethostname()  # a container's own hostname
        environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"
        checks.append(
            subprocess.Popen(
                ["sh", "-c", test[1]],
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        )
    for check in checks:
        output, _ = check.communicate(timeout=40)
        assert check.returncode == 0, output.decode()


def test_the_flower_service_answers_behind_basic_auth(started, deployment, env):
    flower = compose.service("flower", env)
    environment = service_env(
        "flower", env, deployment["redis_url"], deployment["database"], deployment["home"]
    )
    assert environment["FLOWER_BASIC_AUTH"] == (
        f"{env['TOOLRUN_FLOWER_USER']}:{env['TOOLRUN_FLOWER_PASSWORD']}"
    )
    port = processes.free_port()
    environment |= {"FLOWER_PORT": str(port), "FLOWER_ADDRESS": "127.0.0.1"}
    pid, log = started(compose.local_argv(flower["command"]), "flower", environment)
    url = f"http://127.0.0.1:{port}/"
    user, password = env["TOOLRUN_FLOWER_USER"], env["TOOLRUN_FLOWER_PASSWORD"]
    processes.wait_for_basic_auth(url, user, password, pid=pid, log=log, timeout=40)
    try:
        urllib.request.urlopen(url + "metrics", timeout=5)
        raise AssertionError("/metrics answered without credentials")
    except urllib.error.HTTPError as error:
        assert error.code == 401
    with urllib.request.urlopen(url + "healthcheck", timeout=5) as answer:
        assert answer.read() == b"OK"


def test_the_gateway_service_serves_a_batch_to_a_key(started, deployment, env, workspace):
    gateway = compose.service("gateway", env)
    environment = service_env(
        "gateway", env, deployment["redis_url"], deployment["database"], deployment["home"]
    )
    port = str(processes.free_port())
    argv = [port if arg == "8000" else arg for arg in compose.local_argv(gateway["command"])]
    argv[argv.index("0.0.0.0")] = "127.0.0.1"
    made = subprocess.run(
        [
            *compose.local_argv(["toolrun"]),
            "keys",
            "create",
            "orchestrator",
            "--role",
            "submitter",
            "--workspace-root",
            str(workspace),
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    pid, log = started(argv, "gateway", environment)
    check = gateway["healthcheck"]["test"][-1].replace("8000", port)
    deadline = time.monotonic() + 40
    while subprocess.run([sys.executable, "-c", check], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline and processes.is_alive(pid), log.read_text()[-2000:]
        time.sleep(0.2)
    (workspace / "g.txt").write_text("through the gateway\n")
    body = json.dumps(
        {
            "calls": [{"id": "g", "name": "read_file", "arguments": {"path": "g.txt"}}],
            "workspace": str(workspace),
            "mode": "auto",
        }
    ).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    url = f"http://127.0.0.1:{port}/v1/batches"
    with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=30) as answer:
        batch_id = json.loads(answer.read())["batch_id"]
    request = urllib.request.Request(f"{url}/{batch_id}?wait=30", headers=headers)
    with urllib.request.urlopen(request, timeout=60) as answer:
        state = json.loads(answer.read())
    assert [r["status"] for r in state["results"]] == ["ok"]
    assert "through the gateway" in json.dumps(state["results"][0])
