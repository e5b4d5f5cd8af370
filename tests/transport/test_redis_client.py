"""Sentinel URLs, as Celery writes them, and what they give toolrun's client
and Celery: the sentinels, the master's password and database, the master's
name and the sentinels' own password; a missing master name says what to set."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from runtime.errors import ConfigurationError
from runtime.settings import Settings
from runtime.transport import redis_client
from runtime.transport.app import make_app

URL = "sentinel://:p%40ss@10.0.0.1:26379/2;sentinel://10.0.0.2;sentinel://:p%40ss@10.0.0.3:26380"


def test_a_sentinel_url_names_every_sentinel_and_the_masters_credentials():
    address = redis_client.parse(URL)
    assert address.sentinels == [("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.3", 26380)]
    assert (address.password, address.db) == ("p@ss", 2)
    assert redis_client.is_sentinel(URL) and not redis_client.is_sentinel("redis://h:6379/0")
    with pytest.raises(ConfigurationError, match="sentinel://host:port"):
        redis_client.parse("sentinel://h:1;redis://h:2")


def test_without_a_master_name_a_sentinel_url_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="TOOLRUN_REDIS_MASTER_NAME"):
        redis_client.state_client(Settings(home=tmp_path), URL)


def test_celery_gets_the_master_name_and_sentinel_password_for_broker_and_results(tmp_path):
    settings = Settings(
        home=tmp_path,
        redis_master_name="main",
        redis_sentinel_password=SecretStr("sentinel-secret"),
    )
    app = make_app(settings, redis_url=URL)
    expected = {"master_name": "main", "sentinel_kwargs": {"password": "sentinel-secret"}}
    assert app.conf.broker_url == URL and app.conf.result_backend == URL
    assert expected.items() <= app.conf.broker_transport_options.items()
    assert app.conf.result_backend_transport_options == expected
    client = redis_client.state_client(settings, URL)  # no connection until used
    pool = client.connection_pool
    assert pool.service_name == "main" and pool.connection_kwargs["password"] == "p@ss"
