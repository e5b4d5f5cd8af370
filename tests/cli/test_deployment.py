"""`toolrun up`, `status` and `run` against a stack whose processes were killed
(its record left behind) and against a Redis URL nothing answers: one line
naming what does not answer and what to run, a non-zero exit, within seconds
(the subprocess timeouts below are far under a batch's five minutes); `up`
starts a new stack over the dead record. A stack `toolrun up` started is found
from any directory (the user's state directory); finding none writes nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.settings import Settings
from runtime.stack.embedded import start_stack, stop_stack, stop_worker
from runtime.stack.processes import free_port, is_alive, stop_process
from runtime.stack.record import RECORD, load_record
from runtime.stack.redis_server import redis_needles
from tests.support.cli import assert_one_line_error, toolrun, toolrun_env

pytestmark = [pytest.mark.server, pytest.mark.timeout(180)]
QUICK = 20  # seconds: a hang until the batch's deadline fails the test
A_CALL = [{"id": "c1", "name": "list_dir", "arguments": {"path": "."}}]


@pytest.fixture(scope="module")
def dead_home(tmp_path_factory) -> Path:
    """The home of a stack killed with SIGKILL, Redis included: its record stays."""
    home = tmp_path_factory.mktemp("dead-home")
    record = start_stack(Settings(home=home), flower=False)
    for worker in record.workers:
        stop_worker(worker, graceful=False)
    stop_process(record.redis_pid, needles=redis_needles(record.redis_url), graceful=False)
    assert (home / RECORD).exists() and not is_alive(record.redis_pid)
    return home


@pytest.fixture
def batch(tmp_path) -> Path:
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(A_CALL))
    return path


def test_status_of_a_dead_stack_is_one_line_naming_its_redis(dead_home):
    done = toolrun("status", env=toolrun_env(dead_home), timeout=QUICK)
    record = load_record(dead_home)
    port = record.redis_url.rsplit(":", 1)[1].split("/")[0]
    assert_one_line_error(done, "is down", f"127.0.0.1:{port}", "run `toolrun up`")


def test_run_against_a_dead_stack_fails_at_once(dead_home, batch, tmp_path):
    done = toolrun("run", str(batch), "--workspace", str(tmp_path), env=toolrun_env(dead_home))
    assert_one_line_error(done, "is down", "run `toolrun up`")


def test_a_redis_url_nothing_answers_is_named_unreachable(tmp_path, batch):
    port = free_port()
    env = toolrun_env(tmp_path / "home", TOOLRUN_REDIS_URL=f"redis://127.0.0.1:{port}/0")
    for args in (("status",), ("run", str(batch), "--workspace", str(tmp_path))):
        done = toolrun(*args, env=env, timeout=QUICK)
        line = assert_one_line_error(done, f"127.0.0.1:{port}", "TOOLRUN_REDIS_URL")
        assert "does not answer" in line and "signing key" not in line
    assert not (tmp_path / "home" / "ledger.db").exists()


def test_up_over_a_dead_record_starts_a_new_stack(dead_home, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(dead_home / RECORD, home / RECORD)
    dead = load_record(home)
    env = toolrun_env(home)
    try:
        done = toolrun("up", env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "already up" not in done.stdout and "is down" in done.stdout
        fresh = load_record(home)
        assert fresh.redis_url != dead.redis_url and is_alive(fresh.redis_pid)
        status = toolrun("status", env=env, timeout=QUICK)
        assert status.returncode == 0, status.stderr
        assert "worker  up" in status.stdout
    finally:
        toolrun("down", env=env, timeout=60)
        stop_stack(home)  # if `down` failed, what `up` started still stops


def user_env(state: Path) -> dict[str, str]:
    """A user's environment: no TOOLRUN_HOME, the stack in their state directory."""
    env = toolrun_env(state)
    del env["TOOLRUN_HOME"]
    return env | {"XDG_STATE_HOME": str(state)}


def from_env(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = (
        "from runtime import Runtime\nrt = Runtime.from_env()\n"
        "print(rt.deployment.redis_url)\nrt.close()"
    )
    return subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_a_stack_started_in_one_directory_is_found_from_another(tmp_path, batch):
    state, here, there, elsewhere = (tmp_path / name for name in ("state", "a", "b", "c"))
    for folder in (here, there, elsewhere):
        folder.mkdir()
    env = user_env(state)
    try:
        assert toolrun("up", env=env, cwd=here, timeout=120).returncode == 0
        record = load_record(state / "toolrun")
        assert record is not None
        status = toolrun("status", env=env, cwd=there, timeout=QUICK)
        assert status.returncode == 0 and "worker  up" in status.stdout, status
        ran = toolrun(
            "run", str(batch), "--mode", "auto", "--workspace", str(there), "--json", env=env,
            cwd=there, timeout=60,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert [r["status"] for r in json.loads(ran.stdout)["results"]] == ["ok"]
        client = from_env(env, elsewhere)
        assert client.stdout.strip() == record.redis_url, client.stderr
        assert toolrun("home", env=env, cwd=there).stdout.strip() == str(state / "toolrun")
        assert toolrun("down", env=env, cwd=elsewhere, timeout=60).stdout.strip() == "stopped"
    finally:
        stop_stack(state / "toolrun")
        stop_stack(here / ".toolrun")  # where a `toolrun up` without a per-user home put it
    assert not [path for path in tmp_path.rglob(".toolrun")]


def test_a_client_that_finds_no_stack_writes_nothing(tmp_path, batch):
    state, folder = tmp_path / "state", tmp_path / "somewhere"
    folder.mkdir()
    env = user_env(state)
    for args in (("run", str(batch), "--workspace", str(folder)), ("status",)):
        done = toolrun(*args, env=env, cwd=folder, timeout=QUICK)
        assert_one_line_error(done, "no stack is up", str(state / "toolrun"), "run `toolrun up`")
    client = from_env(env, folder)
    assert client.returncode != 0 and "no stack is up" in client.stderr
    assert not state.exists() and list(folder.iterdir()) == []
