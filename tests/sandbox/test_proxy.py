"""The proxy a sandboxed call reaches the network through (docs/architecture.md,
"The sandbox"), spoken to on its unix socket as the bridge does: only the hosts
listed, only at addresses the internal-address check admits, never toolrun's own
Redis; a 403 that says why otherwise."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from runtime.sandbox import network
from runtime.sandbox.proxy import Proxy
from tests.support.web import serving

LOOPBACK = ("127.0.0.0/8",)  # internal_hosts that admit the test's server


@pytest.fixture
def port() -> Iterator[int]:
    with serving() as port:
        yield port


def ask(proxy: Proxy, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(str(proxy.path))
        client.sendall(request)
        client.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: client.recv(65536), b""))


def get(host: str, port: int) -> bytes:
    return (
        f"GET http://{host}:{port}/a?b=1 HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Proxy-Authorization: Basic eA==\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("listed", ["localhost", "LocalHost.", "127.0.0.1", "127.0.0.0/8"])
def test_a_listed_host_is_reached_and_the_request_is_made_plain(port, listed):
    host = "127.0.0.1" if listed[0].isdigit() else "localhost"
    with Proxy((listed,), LOOPBACK) as proxy:
        answer = ask(proxy, get(host, port))
    assert answer.startswith(b"HTTP/1.0 200"), answer
    assert answer.endswith(b"inner /a?b=1")  # asked in origin-form
    assert b"X-Proxy-Authorization: False" in answer  # the proxy's own header dropped


@pytest.mark.parametrize(
    ("host", "answer"),
    [
        ("a.example.invalid", b"HTTP/1.1 502"),  # listed: looked up (.invalid never resolves)
        ("b.a.example.invalid", b"HTTP/1.1 502"),
        ("example.invalid", b"HTTP/1.1 403"),  # the domain itself is not its subdomains
        ("xexample.invalid", b"HTTP/1.1 403"),
    ],
)
def test_a_star_entry_lists_the_domain_s_subdomains(host, answer):
    with Proxy(("*.example.invalid",), LOOPBACK) as proxy:
        got = ask(proxy, get(host, 80))
    assert got.startswith(answer), got


def test_connect_opens_a_tunnel_to_a_listed_host(port):
    request = f"CONNECT localhost:{port} HTTP/1.1\r\n\r\nGET /t HTTP/1.0\r\n\r\n".encode()
    with Proxy(("localhost",), LOOPBACK) as proxy:
        answer = ask(proxy, request)
    assert answer.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.0 200")
    assert answer.endswith(b"inner /t")


@pytest.mark.parametrize(
    ("listed", "host", "says"),
    [
        (("localhost",), "127.0.0.1", "127.0.0.1 is not among the hosts"),
        (("ocalhost",), "localhost", "localhost is not among the hosts"),
        (("10.0.0.0/8",), "localhost", "is not among the hosts sandbox.network.allow lists"),
    ],
)
def test_a_host_not_listed_gets_a_403_naming_it(port, listed, host, says):
    with Proxy(listed, LOOPBACK) as proxy:
        answer = ask(proxy, get(host, port))
    assert answer.startswith(b"HTTP/1.1 403") and says.encode() in answer, answer
    assert b"inner" not in answer


def test_a_listed_internal_host_is_refused_unless_internal_hosts_admits_it(port):
    with Proxy(("localhost",)) as proxy:
        answer = ask(proxy, get("localhost", port))
    assert answer.startswith(b"HTTP/1.1 403") and b"a loopback address" in answer, answer


def test_toolrun_s_redis_is_refused_even_when_listed_and_admitted(port, monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLRUN_HOME", str(tmp_path))
    monkeypatch.setenv("TOOLRUN_REDIS_URL", f"redis://127.0.0.1:{port}/0")
    network._services.cache_clear()
    try:
        with Proxy(("localhost",), LOOPBACK) as proxy:
            plain = ask(proxy, get("localhost", port))
            tunnel = ask(proxy, f"CONNECT 127.0.0.2:{port} HTTP/1.1\r\n\r\n".encode())
    finally:
        network._services.cache_clear()
    assert plain.startswith(b"HTTP/1.1 403") and b"toolrun's own Redis" in plain, plain
    assert tunnel.startswith(b"HTTP/1.1 403"), tunnel


@pytest.mark.parametrize(
    "request_",
    [b"GET /relative HTTP/1.1\r\n\r\n", b"GET ftp://localhost/ HTTP/1.1\r\n\r\n", b"nonsense\r\n"],
)
def test_what_is_not_a_proxy_request_gets_a_400(request_):
    with Proxy(("localhost",), LOOPBACK) as proxy:
        answer = ask(proxy, request_)
    assert answer.startswith(b"HTTP/1.1 400"), answer


def test_the_socket_is_gone_when_the_call_ends():
    with Proxy(("localhost",)) as proxy:
        assert proxy.path.exists()
    assert not proxy.directory.exists()
