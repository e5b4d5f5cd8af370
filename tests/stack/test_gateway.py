"""The embedded stack's gateway, as `toolrun up` starts it: on loopback, its
URL printed and recorded, and stopped by `toolrun down`."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from runtime.stack import processes
from runtime.stack.embedded import load_record, stop_stack
from tests.support.cli import REPO, toolrun, toolrun_env

pytestmark = [pytest.mark.server, pytest.mark.timeout(120)]  # starts a stack


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    stop_stack(home)


def test_up_starts_the_gateway_prints_its_url_and_down_stops_it(home):
    env = toolrun_env(home, TOOLRUN_READS_CONCURRENCY="1")
    done = toolrun("up", env=env, cwd=REPO, timeout=110)
    try:
        assert done.returncode == 0, done.stderr
        gateway = load_record(home).gateway
        assert f"gateway {gateway['url']}" in done.stdout
        assert gateway["url"].startswith("http://127.0.0.1:")
        with urllib.request.urlopen(f"{gateway['url']}/readyz", timeout=10) as answer:
            assert answer.status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{gateway['url']}/v1/approvals", timeout=10)
        assert refused.value.code == 401
    finally:  # a failed check must not leave the stack running
        assert toolrun("down", env=env, cwd=REPO).returncode == 0
    assert not processes.is_alive(gateway["pid"])
