"""The sessions registry on real processes: a session records itself before its
command runs, refuses to run once the process that started it is gone, and
whatever a dead process recorded is killed by whoever looks after it (its
worker's main process, or the next worker to start)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runtime import sessions
from tests.support.dead_pool import dead_pool as dead_pool_under
from tests.support.waiting import wait_for


@pytest.fixture
def root(tmp_path):
    sessions.configure(tmp_path / "sessions")
    [here] = (tmp_path / "sessions").iterdir()  # this host and pid namespace
    yield here
    sessions.configure(None)


def alive(pid: int) -> bool:
    fields = sessions._stat(str(pid))
    return fields is not None and fields[0] not in "ZX"


def dead_pool(root: Path) -> tuple[int, int]:
    """A pool process that recorded a session and was SIGKILLed: (its pid, the session's)."""
    return dead_pool_under(root.parent)


def test_nothing_is_recorded_until_a_worker_names_a_root():
    assert not sessions.recording()
    assert sessions.wrapped(["bash", "-c", "true"]) == ["bash", "-c", "true"]
    assert sessions.end_own() and sessions.end_left_by(1) and sessions.end_orphans()


def test_a_session_records_itself_and_dies_with_its_call(root, tmp_path):
    child = subprocess.Popen(
        sessions.wrapped(["bash", "-c", "echo ran > ran; exec sleep 60"]),
        cwd=tmp_path,
        start_new_session=True,
    )
    wait_for(lambda: (tmp_path / "ran").exists())
    [directory] = root.iterdir()
    assert directory.name.startswith(f"{os.getpid()}-")
    assert [entry.name for entry in directory.iterdir()] == [str(child.pid)]

    assert sessions.end_own()
    assert child.wait(10) == -9
    assert list(directory.iterdir()) == []
    sessions.leave()  # the process exits: its directory goes
    assert list(root.iterdir()) == []


def test_a_session_whose_starter_is_gone_runs_nothing(root, tmp_path):
    (root / "1-0").mkdir()
    argv = sessions.wrapped(["touch", "ran"])
    argv[5] = "1"  # the process expected to have started it: not its parent
    assert subprocess.run(argv, cwd=tmp_path).returncode == 125
    assert not (tmp_path / "ran").exists()


def test_what_a_dead_pool_process_left_is_killed_by_its_worker(root):
    pool, session = dead_pool(root)
    assert alive(session)  # SIGKILL of its starter leaves it running
    mine = subprocess.Popen(sessions.wrapped(["sleep", "60"]), start_new_session=True)
    wait_for(lambda: (sessions._directory() / str(mine.pid)).exists())

    assert sessions.end_left_by(pool)
    assert not alive(session)
    assert not list(root.glob(f"{pool}-*"))
    assert sessions.end_left_by(os.getpid())  # a live process's sessions are its own
    assert alive(mine.pid)
    assert sessions.end_own()
    mine.wait(10)


def test_a_starting_worker_kills_what_dead_pool_processes_left(root):
    left = [dead_pool(root) for _ in range(2)]
    assert all(alive(session) for _, session in left)
    assert sessions.end_orphans()
    assert not any(alive(session) for _, session in left)
    assert list(root.iterdir()) == []


def test_a_call_that_started_no_session_looks_at_nothing(root, tmp_path):
    assert sessions.end_own()
    assert list(root.iterdir()) == []  # no look: not even its directory was made

    child = subprocess.Popen(sessions.wrapped(["sleep", "60"]), start_new_session=True)
    [directory] = root.iterdir()
    wait_for(lambda: [entry.name for entry in directory.iterdir()] == [str(child.pid)])
    assert sessions.end_own()
    assert child.wait(10) == -9
    assert list(directory.iterdir()) == []
    sessions.leave()
