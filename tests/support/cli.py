"""`toolrun` as a user runs it: a process of its own running the command line
(forked from one that imported it once, `cli_forks`, or the installed console
script), the environment it runs in, and what a one-line error looks like."""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from runtime.stack.record import StackRecord
from tests.conftest import TEST_TOOLS
from tests.support.fast_tier.sitecustomize import is_server

REPO = Path(__file__).resolve().parents[2]
SCRIPT = shutil.which("toolrun", path=os.path.dirname(sys.executable))


def toolrun_env(home: Path, **settings: str) -> dict[str, str]:
    """The caller's environment without any TOOLRUN_* of its own, plus `settings`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLRUN_")}
    env.update({"TOOLRUN_HOME": str(home), "NO_COLOR": "1", **settings})
    return env


def stack_env(stack: StackRecord, user_settings: Path) -> dict[str, str]:
    """The environment of a `toolrun` that submits to the session's stack, with
    the test tools and the session's user settings."""
    return toolrun_env(
        stack.home,
        TOOLRUN_REDIS_URL=stack.redis_url,
        TOOLRUN_DATABASE_URL=stack.database_url,
        TOOLRUN_TOOL_MODULES=TEST_TOOLS,
        TOOLRUN_USER_SETTINGS_FILE=str(user_settings),
    )


def toolrun(
    *args: str, env: dict[str, str], cwd: Path = REPO, timeout: float = 60, script: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run `toolrun` in a process of its own: forked from `cli_forks`, unless
    `script` asks for the installed script (`python -m runtime.cli` if there is
    none), the command starts servers (the fast tier's guard must see it), or
    another thread of this test runs one already."""
    if not script and not is_server(["toolrun", *args]) and _FORKS_FREE.acquire(blocking=False):
        try:
            return _forks().run(list(args), env, cwd, timeout)
        finally:
            _FORKS_FREE.release()
    argv = [SCRIPT] if SCRIPT else [sys.executable, "-m", "runtime.cli"]
    return subprocess.run(
        [*argv, *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class _Forks:
    """This test process's `cli_forks` server, started on its first run."""

    def __init__(self) -> None:
        self.server = subprocess.Popen(
            [sys.executable, "-m", "tests.support.cli_forks"],
            cwd=REPO,
            env=toolrun_env(Path(tempfile.gettempdir())),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.folder = Path(tempfile.mkdtemp(prefix="toolrun-forks-"))
        atexit.register(self.close)

    def close(self) -> None:
        """End the server (it ends when its requests do) and its files."""
        self.server.stdin.close()
        self.server.wait(timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)

    def run(
        self, args: list[str], env: dict[str, str], cwd: Path, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        out, err = self.folder / "out", self.folder / "err"
        request = {"args": args, "env": env, "cwd": str(cwd), "out": str(out), "err": str(err)}
        self.server.stdin.write(json.dumps(request) + "\n")
        self.server.stdin.flush()
        pid = json.loads(self.server.stdout.readline())["pid"]
        ready, _, _ = select.select([self.server.stdout], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        code = json.loads(self.server.stdout.readline())["code"]
        argv = ["toolrun", *args]
        if not ready:
            raise subprocess.TimeoutExpired(argv, timeout, out.read_text(), err.read_text())
        return subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())


_FORKS: list[_Forks] = []
_FORKS_FREE = threading.Lock()


def _forks() -> _Forks:
    if not _FORKS or _FORKS[0].server.poll() is not None:
        _FORKS[:] = [_Forks()]
    return _FORKS[0]


def assert_one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("toolrun: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert done.stdout == ""
    return lines[0]
