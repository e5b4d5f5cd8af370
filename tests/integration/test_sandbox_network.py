"""A sandboxed command reaches the network only as the org policy lets it
(docs/architecture.md, "The sandbox"): with `sandbox.network.allow`, the hosts it
lists and nothing else, through the call's proxy; toolrun's own Redis never, even
when listed. On the session's stack, with a local HTTP server that the org
policy's `internal_hosts` admits (loopback is refused otherwise)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.conftest import runtime_on
from tests.support.web import serving

pytestmark = pytest.mark.timeout(120)
RULE = {"allow": ["shell(*)"]}
FETCH = "import urllib.request as u; print(u.urlopen('{url}', timeout=10).read().decode())"


@pytest.fixture
def port() -> Iterator[int]:
    """A web server on the worker's loopback, which the sandbox cannot reach directly."""
    with serving() as port:
        yield port


@pytest.fixture
def allowing(stack, user_settings, tmp_path):
    """A client whose org policy lets sandboxed processes reach `localhost`."""
    policy = tmp_path / "org.json"
    policy.write_text(
        json.dumps(
            {"internal_hosts": ["127.0.0.0/8"], "sandbox": {"network": {"allow": ["localhost"]}}}
        )
    )
    client = runtime_on(stack, user_settings, policy_file=policy)
    yield client
    client.close()


def shell(runtime, workspace, command: str):
    batch = [{"id": "s", "name": "shell", "arguments": {"command": command}}]
    result = runtime.submit(batch, mode="auto", workspace=workspace, rules=RULE).results(
        timeout=60
    )[0]
    assert result.ok, result.model_message
    return result.content


def test_a_listed_host_is_reached_through_the_proxy(allowing, workspace, port):
    url = f"http://localhost:{port}/"
    fetched = shell(allowing, workspace, f'python3 -c "{FETCH.format(url=url)}"')
    assert fetched["exit_code"] == 0 and fetched["stdout"] == "inner\n", fetched
    tunnelled = shell(allowing, workspace, f"curl -sS --proxytunnel {url}")  # CONNECT, as https
    assert tunnelled["stdout"] == "inner", tunnelled


def test_a_host_not_listed_gets_a_403_that_says_why(allowing, workspace, port):
    got = shell(allowing, workspace, f"curl -sS -w ' %{{http_code}}' http://127.0.0.1:{port}/")
    assert got["stdout"].endswith(" 403"), got
    assert "127.0.0.1 is not among the hosts sandbox.network.allow lists" in got["stdout"]
    assert "inner" not in got["stdout"]


def test_toolrun_s_redis_is_never_reached_even_through_a_listed_host(allowing, stack, workspace):
    redis = urlsplit(stack.redis_url).port
    proxied = shell(allowing, workspace, f"curl -sS -w ' %{{http_code}}' http://localhost:{redis}/")
    assert proxied["stdout"].endswith(" 403"), proxied
    assert f":{redis} is toolrun's own Redis" in proxied["stdout"], proxied
    tunnelled = shell(allowing, workspace, f"curl -sS -p http://localhost:{redis}/ 2>&1")
    assert "CONNECT tunnel failed, response 403" in tunnelled["stdout"], tunnelled
    direct = shell(
        allowing,
        workspace,
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {redis}), 2)\"",
    )
    assert direct["exit_code"] != 0 and "Connection refused" in direct["stderr"], direct


def test_without_the_policy_key_there_is_no_network_at_all(runtime, workspace, port):
    got = shell(runtime, workspace, f"curl -sS http://localhost:{port}/; env | grep -ci proxy")
    assert "inner" not in got["stdout"] and got["stdout"].strip() == "0", got
