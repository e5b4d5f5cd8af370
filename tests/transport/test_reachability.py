"""`require_reachable`: a Redis or broker that does not answer is a StackError at
once, naming its address (never its password) and what to do; a client built
from the environment says so instead of "no signing key"."""

from __future__ import annotations

import pytest

from runtime.client import Runtime
from runtime.errors import StackError
from runtime.settings import Settings
from runtime.stack.processes import free_port
from runtime.transport.reachability import address, require_reachable


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:secret@127.0.0.1:7001/0", "127.0.0.1:7001"),
        ("redis://localhost", "localhost:6379"),
        ("sentinel://:pw@a:26379;sentinel://b:26380", "a:26379,b:26380"),
        ("amqp://user:secret@rabbit:5672//", "rabbit:5672"),
    ],
)
def test_an_address_shows_where_and_never_the_password(url, shown):
    assert address(url) == shown


def test_a_redis_url_nothing_answers_is_named_with_its_setting(tmp_path):
    port = free_port()
    settings = Settings(home=tmp_path, redis_url=f"redis://:secret@127.0.0.1:{port}/0")
    with pytest.raises(StackError) as raised:
        require_reachable(settings, seconds=1)
    said = str(raised.value)
    assert f"127.0.0.1:{port} (TOOLRUN_REDIS_URL) does not answer" in said
    assert "secret" not in said


def test_a_broker_nothing_answers_is_named_with_its_setting(stack, tmp_path):
    port = free_port()
    broker = f"amqp://guest:guest@127.0.0.1:{port}//"
    settings = Settings(home=tmp_path, redis_url=stack.redis_url, broker_url=broker)
    with pytest.raises(StackError, match=f"the broker at 127.0.0.1:{port} .TOOLRUN_BROKER_URL."):
        require_reachable(settings, seconds=1)
    assert require_reachable(settings.model_copy(update={"broker_url": None})) == stack.redis_url


def test_a_client_of_a_redis_nothing_answers_names_it_rather_than_the_key(tmp_path, monkeypatch):
    port = free_port()
    monkeypatch.setenv("TOOLRUN_HOME", str(tmp_path))
    monkeypatch.setenv("TOOLRUN_REDIS_URL", f"redis://127.0.0.1:{port}/0")
    with pytest.raises(StackError, match=f"127.0.0.1:{port} .TOOLRUN_REDIS_URL. does not answer"):
        Runtime.from_env()
    settings = Settings(home=tmp_path, redis_url=f"redis://127.0.0.1:{port}/0")
    with pytest.raises(StackError, match="does not answer"):
        Runtime(settings)
