"""`toolrun` as a user runs it: the installed console script in a subprocess,
the environment it runs in, and what a one-line error looks like."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from runtime.stack.record import StackRecord
from tests.conftest import TEST_TOOLS

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
    *args: str, env: dict[str, str], cwd: Path = REPO, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run `toolrun` (the installed script; `python -m runtime.cli` if there is none)."""
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
