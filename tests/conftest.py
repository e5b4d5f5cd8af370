"""Shared fixtures. Integration tests run against one embedded stack per session:
a real redis-server and real `celery worker` processes (a reads and an effects
queue), started the way `toolrun up` starts them. Never an eager mode or a fake."""

from __future__ import annotations

import json
import os

import pytest

from runtime.settings import Settings, get_settings

TEST_TOOLS = "tests.support.tools"


@pytest.fixture(autouse=True)
def _fresh_settings():
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    from runtime.stack.embedded import start_stack, stop_stack

    home = tmp_path_factory.mktemp("toolrun-home")
    settings = Settings(home=home, tool_modules=TEST_TOOLS, reads_concurrency=8)
    record = start_stack(settings, flower=False, extra_env={"TOOLRUN_TOOL_MODULES": TEST_TOOLS})
    yield record
    stop_stack(home)


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

    settings = Settings(home=stack.home, redis_url=stack.redis_url,
                        database_url=stack.database_url, tool_modules=TEST_TOOLS,
                        user_settings_file=user_settings, **overrides)  # fmt: skip
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
