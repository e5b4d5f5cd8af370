"""Shared fixtures. Integration tests run against one embedded stack per session:
a real redis-server and real `celery worker` processes (a reads and an effects
queue), started the way `toolrun up` starts them. Never an eager mode or a fake.

Two tiers: a test that needs a server process (redis-server, a celery worker, a
stack, PostgreSQL) is marked `server` here, by what it uses and where it lives;
`make check` runs the others (`-m "not server"`) and fails any of them that
starts a server process after all."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from runtime.settings import Settings, get_settings
from runtime.stack.record import StackRecord
from tests.support.fast_tier import sitecustomize as guard

TEST_TOOLS = "tests.support.tools"

# No test reads or writes the real user's toolrun home (runtime.settings.default_home,
# under $XDG_STATE_HOME): each test process, and every process it starts, has a state
# directory of its own, removed when the process ends its run.
STATE_HOME = tempfile.mkdtemp(prefix="toolrun-state-")
os.environ["XDG_STATE_HOME"] = STATE_HOME

# What makes a test a `server` test: the fixtures that start (or need) the session's
# stack, and the folders whose tests all run against processes. A module elsewhere
# that starts processes itself says so with `pytestmark = pytest.mark.server`.
SERVER_FIXTURES = {"stack", "runtime", "gateway"}
SERVER_FOLDERS = {"integration", "gateway"}
SERVER_MARKS = {"postgres", "faults"}


# The files that take longest in `make test` (25 s or more each, longest first, as a
# run timed per file measured them; the browser test by its CI figure). `--dist
# loadfile` hands files to the processes in collection order, and a process takes its
# next file while the last tests of its current one still run, so these go first and
# the many short files fill in at the end: collected last, one of them would run alone
# while the other processes have nothing left to do.
LONG_FILES = (
    "integration/test_readme.py",
    "integration/test_faults_ledger_locked.py",
    "test_bench_smoke.py",
    "integration/test_faults_ledger.py",
    "integration/test_ownership.py",
    "integration/test_keys.py",
    "docs/test_site_in_a_browser.py",
    "integration/test_limits.py",
    "integration/test_approvals.py",
    "integration/test_leases.py",
    "integration/test_rabbitmq.py",
    "transcript/test_stack.py",
    "integration/test_mcp.py",
    "integration/test_faults_workers.py",
    "cli/test_deployment.py",
    "integration/test_stack.py",
    "batch/test_renotifying.py",
    "integration/test_scaling.py",
    "integration/test_faults_redis.py",
    "integration/test_sentinel.py",
    "integration/test_sessions.py",
    "cli/test_gateway.py",
    "transcript/test_seal.py",
    "integration/test_fences.py",
    "integration/test_faults_stuck.py",
    "integration/test_demo.py",
)


def pytest_collection_modifyitems(config, items):
    tests = Path(__file__).parent
    for item in items:
        folder = Path(item.path).relative_to(tests).parts[0]
        if (
            SERVER_FIXTURES.intersection(item.fixturenames)
            or folder in SERVER_FOLDERS
            or any(item.get_closest_marker(mark) for mark in SERVER_MARKS)
        ):
            item.add_marker(pytest.mark.server)
    servers = {
        Path(item.path).relative_to(tests) for item in items if item.get_closest_marker("server")
    }
    items.sort(key=lambda item: _schedule_rank(Path(item.path).relative_to(tests), servers))


def _schedule_rank(path: Path, servers: set[Path]) -> tuple[int, int]:
    """The long files first, then every other file with a `server` test (seconds
    each: they start processes and wait on them), then the others (milliseconds
    each), wherever their folder is; the sort is stable, so each file's tests stay
    together and in order."""
    name = path.as_posix()
    if name in LONG_FILES:
        return (0, LONG_FILES.index(name))
    return (1, 0 if path in servers else 1)


def pytest_configure(config):
    """xdist keeps the order of collection (see LONG_FILES) instead of putting the
    files with the most tests first. In the fast tier, every Python process of the
    run refuses to start a server process (tests/support/fast_tier/sitecustomize.py)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if "not server" not in (config.getoption("markexpr") or ""):
        return
    if hasattr(config, "workerinput"):  # an xdist worker: the guard came with its environment
        return
    folder = Path(__file__).parent / "support" / "fast_tier"
    handle, log = tempfile.mkstemp(prefix="toolrun-server-starts-", suffix=".log")
    os.close(handle)
    os.environ[guard.STARTS] = log
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    guard.install(log)


def pytest_unconfigure(config):
    shutil.rmtree(STATE_HOME, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    log = os.environ.get(guard.STARTS)
    if log is None or hasattr(session.config, "workerinput"):
        return
    del os.environ[guard.STARTS]
    starts = Path(log).read_text()
    Path(log).unlink()
    if starts:
        print(f"\nthe fast tier started server processes (mark their tests `server`):\n{starts}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _fresh_settings():
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@contextmanager
def embedded_stack(home: Path, **settings) -> Iterator[StackRecord]:
    """A stack as the session's (the test tools, eight reads slots, no Flower),
    with `settings` on top; stopped when the block ends."""
    from runtime.stack.embedded import start_stack, stop_stack

    settings = Settings(home=home, tool_modules=TEST_TOOLS, reads_concurrency=8, **settings)
    record = start_stack(settings, flower=False, extra_env={"TOOLRUN_TOOL_MODULES": TEST_TOOLS})
    try:
        yield record
    finally:
        stop_stack(home)


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    with embedded_stack(tmp_path_factory.mktemp("toolrun-home")) as record:
        yield record


@pytest.fixture(scope="session")
def user_settings(tmp_path_factory):
    """A user settings file that trusts every workspace the tests make (all live
    under pytest's base temp directory). Tests about trust build their own."""
    path = tmp_path_factory.mktemp("user") / "settings.json"
    path.write_text(json.dumps({"trusted_workspaces": [str(tmp_path_factory.getbasetemp())]}))
    return path


def runtime_on(stack, user_settings, **overrides):
    """A client of `stack` (a StackRecord) that trusts the tests' workspaces."""
    from runtime.client import Runtime

    settings = Settings(
        home=stack.home,
        redis_url=stack.redis_url,
        database_url=stack.database_url,
        tool_modules=TEST_TOOLS,
        user_settings_file=user_settings,
        **overrides,
    )
    return Runtime(settings)


@pytest.fixture(scope="session")
def runtime(stack, user_settings):
    rt = runtime_on(stack, user_settings)
    yield rt
    rt.close()


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "workspace"
    root.mkdir()
    return root


def postgres_url() -> str | None:
    return os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
