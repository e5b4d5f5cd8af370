"""One typed settings object from TOOLRUN_* variables: a default for each, and
an unknown or invalid variable is an error naming it."""

from __future__ import annotations

import os

import pytest

from runtime.errors import ConfigurationError
from runtime.settings import Settings, get_settings


@pytest.fixture
def environment(monkeypatch):
    for key in list(os.environ):
        if key.startswith("TOOLRUN_") and not key.startswith("TOOLRUN_TEST_"):
            monkeypatch.delenv(key)
    return monkeypatch


def test_every_setting_has_a_default(environment, tmp_path):
    environment.chdir(tmp_path)
    environment.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    settings = get_settings()
    assert (settings.batch_timeout, settings.approval_timeout, settings.result_max_bytes) == (
        300,
        600,
        32768,
    )
    assert settings.ledger_url == f"sqlite:///{tmp_path / 'state' / 'toolrun' / 'ledger.db'}"


@pytest.mark.parametrize("state", ["", "relative/state"])
def test_the_home_is_in_the_user_s_state_directory_wherever_the_process_runs(
    environment, tmp_path, state
):
    """XDG: an unset, empty or relative $XDG_STATE_HOME means ~/.local/state."""
    environment.chdir(tmp_path)
    environment.setenv("HOME", str(tmp_path / "user"))
    environment.setenv("XDG_STATE_HOME", state)
    assert get_settings().home == tmp_path / "user" / ".local" / "state" / "toolrun"
    environment.setenv("TOOLRUN_HOME", str(tmp_path / "named"))
    get_settings.cache_clear()
    assert get_settings().home == tmp_path / "named"


def test_variables_are_read_once_and_typed(environment):
    environment.setenv("TOOLRUN_BATCH_TIMEOUT", "12.5")
    environment.setenv("TOOLRUN_TOOL_MODULES", " a.tools, ,b ")
    settings = get_settings()
    assert settings.batch_timeout == 12.5 and settings.module_names == ["a.tools", "b"]
    environment.setenv("TOOLRUN_BATCH_TIMEOUT", "1")
    assert get_settings() is settings


def test_an_unknown_variable_is_an_error_that_names_it(environment):
    environment.setenv("TOOLRUN_BATCH_TIMOUT", "5")
    with pytest.raises(ConfigurationError, match="TOOLRUN_BATCH_TIMOUT"):
        get_settings()


def test_an_invalid_value_is_an_error_and_the_test_prefix_is_reserved(environment):
    environment.setenv("TOOLRUN_TEST_POSTGRES_URL", "postgresql://x")  # the suite's own
    environment.setenv("TOOLRUN_DEFAULT_TIMEOUT", "soon")
    with pytest.raises(ConfigurationError, match="default_timeout"):
        get_settings()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TOOLRUN_SIGNING_KEY", "change-me-signing-key"),
        ("TOOLRUN_FLOWER_PASSWORD", "change-me-flower"),
        ("TOOLRUN_REDIS_URL", "redis://:change-me-redis@redis:6379/0"),
        ("TOOLRUN_DATABASE_URL", "postgresql+psycopg://toolrun:change-me-postgres@pg/toolrun"),
    ],
)
def test_a_secret_left_as_the_example_s_placeholder_is_refused_in_one_line(
    environment, variable, value
):
    environment.setenv(variable, value)
    with pytest.raises(ConfigurationError) as refused:
        get_settings()
    said = str(refused.value)
    assert variable in said and "change-me" in said and "\n" not in said, said


def test_a_database_url_replaces_the_embedded_sqlite(tmp_path):
    url = "postgresql://u@db/toolrun"
    assert Settings(home=tmp_path, database_url=url).ledger_url == url
