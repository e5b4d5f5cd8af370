"""Where a process finds its Redis and its signing key: the settings first, else
the embedded stack's record."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from runtime import config
from runtime.errors import StackError
from runtime.settings import Settings
from runtime.stack.record import StackRecord


def record(home) -> StackRecord:
    return StackRecord(
        home=home,
        redis_url="redis://:pw@127.0.0.1:1/0",
        database_url="sqlite:///x.db",
        redis_pid=123,
        signing_key="sk",
    )


def test_settings_win_over_the_record_and_without_either_it_says_what_to_do(tmp_path):
    settings = Settings(home=tmp_path)
    with pytest.raises(StackError, match="toolrun up"):
        config.redis_url(settings)
    assert config.redis_url(settings, required=False) is None
    with pytest.raises(StackError, match="TOOLRUN_SIGNING_KEY"):
        config.signing_key(settings)
    record(tmp_path).save()
    assert config.redis_url(settings) == record(tmp_path).redis_url
    assert config.signing_key(settings) == b"sk"
    own = Settings(home=tmp_path, redis_url="redis://elsewhere:1", signing_key=SecretStr("mine"))
    assert (config.redis_url(own), config.signing_key(own)) == ("redis://elsewhere:1", b"mine")


def test_a_record_that_names_no_redis_is_a_stack_error_naming_its_file(tmp_path):
    (tmp_path / config.STACK_RECORD).write_text('{"home": "x"}')
    with pytest.raises(StackError, match=config.STACK_RECORD):
        config.redis_url(Settings(home=tmp_path))
    (tmp_path / config.STACK_RECORD).write_text("not json")
    with pytest.raises(StackError, match=config.STACK_RECORD):
        config.signing_key(Settings(home=tmp_path))


def test_the_broker_is_the_state_redis_unless_set_or_recorded_for_that_redis(tmp_path):
    settings = Settings(home=tmp_path)
    assert config.broker_url(settings) == config.DEFAULT_REDIS
    assert config.broker_url(settings, state_url="redis://state:1/0") == "redis://state:1/0"
    stack = record(tmp_path)
    stack.broker_url = "amqp://u:p@rabbit:5672/v"
    stack.save()
    assert config.broker_url(settings) == "amqp://u:p@rabbit:5672/v"  # that stack's clients
    other = Settings(home=tmp_path, redis_url="redis://elsewhere:1")
    assert config.broker_url(other) == "redis://elsewhere:1"  # another Redis: not that stack's
    own = Settings(home=tmp_path, broker_url="amqp://mine//")
    assert config.broker_url(own) == "amqp://mine//"
