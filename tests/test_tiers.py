"""The two test tiers (tests/conftest.py): what the fast tier counts as starting
a server process, which fails the run."""

from __future__ import annotations

import pytest

from tests.support.fast_tier.sitecustomize import is_server

SERVERS = [
    ["/usr/bin/redis-server", "--port", "0"],
    ["python", "-m", "celery", "-A", "workers", "worker", "-Q", "reads"],
    [".venv/bin/celery", "-A", "workers", "flower"],
    [".venv/bin/toolrun", "up"],
    ["python", "-m", "runtime.cli", "serve", "--port=1"],
    ["python", "-m", "tests.benchmarks.bench", "--quick"],
    "pg_ctl start -D data",
]
OTHERS = [
    [".venv/bin/toolrun", "tools"],
    ["python", "-m", "runtime.cli", "run", "batch.json"],
    ["sh", "-c", "git diff"],
    ["python", "-c", "import runtime"],
    "ls -la",
]


@pytest.mark.parametrize("argv", SERVERS, ids=str)
def test_a_program_that_is_or_starts_a_server_is_one(argv):
    assert is_server(argv)


@pytest.mark.parametrize("argv", OTHERS, ids=str)
def test_other_programs_are_not(argv):
    assert not is_server(argv)
