"""Child processes of the embedded stack: spawn them, wait until they answer, stop them.

A pid in a stack record may be days old and belong to something else by now, so
a process is signalled only while it is still a child this process spawned, or
while its command line still names what was started (`needles`).
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from runtime.errors import StackError

# The Popen of every child this process spawned. Kept so that an exited child is
# reaped (a zombie still answers kill(pid, 0)), and so that a running child's
# Popen is not garbage-collected with a ResourceWarning.
_CHILDREN: dict[int, subprocess.Popen] = {}

Target = tuple[int, Sequence[str]]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def spawn(argv: Sequence[str], *, log: Path, env: Mapping[str, str]) -> int:
    """Start `argv` in its own session, stdout and stderr appended to `log`; its pid.

    Its own session makes its pid its process group id, so stopping it reaches
    its children too (prefork pool processes), and a Ctrl-C in the terminal
    that started the stack does not reach it.
    """
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(log, "ab") as out:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )
    _CHILDREN[child.pid] = child
    return child.pid


def spawned() -> list[int]:
    """The pids of every process this process has spawned, running or not."""
    return list(_CHILDREN)


def exit_code(pid: int) -> int | None:
    """The exit code of a child this process spawned, None while it runs or if unknown."""
    child = _CHILDREN.get(pid)
    return None if child is None else child.poll()


def is_alive(pid: int) -> bool:
    """Whether `pid` is a running process (zombies count as gone)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _stat(pid)
    return stat is None or stat[0] != "Z"


def command_line(pid: int) -> str | None:
    """The command line of `pid`, space-separated; None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
        found = subprocess.run(
            ["ps", "-ww", "-o", "command=", "-p", str(pid)], capture_output=True, text=True
        )
        return found.stdout.strip() or None
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def owns(pid: int, needles: Sequence[str]) -> bool:
    """Whether `pid` runs and is ours: our unreaped child, or its command line has every needle."""
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    if not is_alive(pid):
        return False
    line = command_line(pid)
    return line is not None and all(needle in line for needle in needles)


def stop_process(
    pid: int, *, needles: Sequence[str], timeout: float = 10.0, graceful: bool = True
) -> bool:
    """Stop one process group we own; see `stop_processes`."""
    return stop_processes([(pid, needles)], timeout=timeout, graceful=graceful)


def stop_processes(
    targets: Iterable[Target], *, timeout: float = 10.0, graceful: bool = True
) -> bool:
    """Stop process groups we own, together: SIGTERM, then SIGKILL after `timeout`.

    Only the group leader gets SIGTERM (a Celery worker shuts its own pool down
    warmly); whatever of the group is left at the deadline gets SIGKILL. With
    `graceful=False` everything gets SIGKILL at once (tests simulating a crash).
    Returns whether every process of every group is gone.
    """
    targets = list(targets)
    if graceful:
        for pid, needles in targets:
            if owns(pid, needles):
                _signal(pid, signal.SIGTERM)
        if _wait_gone(targets, timeout):
            return True
    for pid, needles in targets:
        for member in _members(pid, needles):
            _signal(member, signal.SIGKILL)
    return _wait_gone(targets, 5.0)


def log_tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log file, for an error message."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or f"({path} is empty)"


def wait_for_redis(url: str, *, pid: int | None, log: Path | None, timeout: float) -> None:
    """Return once Redis answers PING; with no `pid` (a Redis we did not start), ask once."""
    # No client-side retries: this loop is the retry, and it must notice a dead child.
    client = redis.Redis.from_url(
        url, socket_connect_timeout=1, socket_timeout=1, retry=Retry(NoBackoff(), 0)
    )
    where = "{host}:{port}".format_map({"port": 6379, **redis.connection.parse_url(url)})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                client.ping()
                return
            except redis.AuthenticationError as error:
                raise StackError(f"Redis at {where} refused the password: {error}") from error
            except redis.ConnectionError as error:
                if pid is not None and not is_alive(pid):
                    raise died("redis-server", pid, log) from error
                if pid is None or time.monotonic() > deadline:
                    raise StackError(f"Redis at {where} does not answer: {error}") from error
            time.sleep(0.05)
    finally:
        client.close()


def wait_for_workers(app: Any, workers: Sequence[Mapping], *, timeout: float) -> None:
    """Return once every worker (`name`, `pid`, `log`) answers a ping through Celery `app`."""
    pending = {worker["name"]: worker for worker in workers}
    deadline = time.monotonic() + timeout
    with app.connection_for_write() as connection:
        while pending:
            for worker in pending.values():
                if not is_alive(worker["pid"]):
                    raise died(f"worker {worker['name']}", worker["pid"], worker["log"])
            if time.monotonic() > deadline:
                late = next(iter(pending.values()))
                raise StackError(
                    f"worker {late['name']} did not answer a ping within {timeout:.0f} s; "
                    f"last lines of {late['log']}:\n{log_tail(Path(late['log']))}"
                )
            # `limit`: return as soon as every pending worker has answered.
            replies = app.control.ping(
                destination=list(pending), timeout=0.5, limit=len(pending), connection=connection
            )
            for reply in replies:
                for name in reply:
                    pending.pop(name, None)


def wait_for_basic_auth(
    url: str, user: str, password: str, *, pid: int, log: Path, timeout: float
) -> None:
    """Return once `url` answers 401 without credentials and 200 with them.

    Anything but 401 without credentials is an error: an open monitor would show
    every call's arguments to whoever can reach the port.
    """
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    authorized = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    deadline = time.monotonic() + timeout
    while True:
        if not is_alive(pid):
            raise died(url, pid, log)
        if time.monotonic() > deadline:
            raise StackError(f"{url} did not answer within {timeout:.0f} s; see {log}")
        anonymous = _http_status(urllib.request.Request(url))
        if anonymous is not None and anonymous != 401:
            raise StackError(f"{url} answered {anonymous} without credentials, not 401")
        if anonymous == 401 and _http_status(authorized) == 200:
            return
        time.sleep(0.1)


def died(what: str, pid: int, log: Path | str | None) -> StackError:
    """The error for a child that exited while it should be starting, quoting its log."""
    code = exit_code(pid)
    status = f"exited with code {code}" if code is not None else "is gone"
    tail = f"; last lines of {log}:\n{log_tail(Path(log))}" if log else ""
    return StackError(f"{what} (pid {pid}) {status}{tail}")


def _http_status(request: urllib.request.Request) -> int | None:
    """The HTTP status of a GET, None while nothing listens."""
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(targets: list[Target], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if not any(_members(pid, needles) for pid, needles in targets):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _members(pgid: int, needles: Sequence[str]) -> list[int]:
    """The live processes of group `pgid` that are ours, leader first."""
    members = [pgid] if owns(pgid, needles) else []
    if not Path("/proc/self").exists():
        return members
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == pgid:
            continue
        stat = _stat(int(entry.name))
        if stat and stat[0] != "Z" and stat[2] == str(pgid) and owns(int(entry.name), needles):
            members.append(int(entry.name))
    return members


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, ..."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()
