"""What the sandbox's network is made of (docs/architecture.md, "The sandbox"):
the policy's hosts, the bridge's command line and environment, and toolrun's own
services, which no policy opens."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from runtime.errors import SandboxUnavailable
from runtime.sandbox import network


@pytest.fixture
def services(monkeypatch, tmp_path):
    """toolrun's Redis on loopback, its broker elsewhere and its ledger in PostgreSQL."""
    monkeypatch.setenv("TOOLRUN_HOME", str(tmp_path))
    monkeypatch.setenv("TOOLRUN_REDIS_URL", "redis://:secret@127.0.0.1:6390/0")
    monkeypatch.setenv("TOOLRUN_BROKER_URL", "amqp://u:p@10.9.8.7//")
    monkeypatch.setenv("TOOLRUN_DATABASE_URL", "postgresql+psycopg://u:p@10.9.8.6/toolrun")
    network._services.cache_clear()
    yield
    network._services.cache_clear()


def address(text: str):
    return ipaddress.ip_address(text)


def test_the_policy_s_hosts_are_its_org_sandbox_network_allow():
    assert network.allowed({}) == ()
    assert network.allowed({"sandbox": {"enabled": True}}) == ()
    assert network.allowed({"sandbox": {"network": {"allow": ["a.org", "*.b.org"]}}}) == (
        "a.org",
        "*.b.org",
    )


@pytest.mark.usefixtures("services")
@pytest.mark.parametrize(
    ("where", "port", "names"),
    [
        ("127.0.0.1", 6390, "Redis"),
        ("127.0.0.2", 6390, "Redis"),  # any loopback address is the same machine
        ("::1", 6390, "Redis"),
        ("0.0.0.0", 6390, "Redis"),
        ("10.9.8.7", 5672, "broker"),  # amqp's default port
        ("10.9.8.6", 5432, "ledger"),
    ],
)
def test_toolrun_s_own_services_are_named_at_every_address_that_reaches_them(where, port, names):
    why = network.own_service(address(where), port)
    assert why is not None and f"toolrun's own {names}" in why


@pytest.mark.usefixtures("services")
@pytest.mark.parametrize(("where", "port"), [("127.0.0.1", 6391), ("10.9.8.7", 6390)])
def test_another_port_or_address_is_not_toolrun_s(where, port):
    assert network.own_service(address(where), port) is None


def test_the_bridge_runs_the_command_behind_it_with_the_proxy_in_its_environment():
    argv, env = network.bridged(["/bin/bash", "-c", "curl x"], {"PATH": "/usr/bin"})
    assert argv[0].startswith(("/usr/", "/bin/")) and argv[1:4] == ["-I", "-S", "-c"]
    assert argv[5:] == [network.SOCKET, str(network.PORT), "/bin/bash", "-c", "curl x"]
    for name in network.PROXY_VARIABLES:
        assert env[name] == f"http://127.0.0.1:{network.PORT}"
    assert env["NO_PROXY"] == "" and env["PATH"] == "/usr/bin"
    assert network.mounts(Path("/tmp/p/proxy.sock")) == [
        "--ro-bind",
        "/tmp/p/proxy.sock",
        network.SOCKET,
    ]


def test_without_a_system_python3_a_networked_call_is_refused_and_says_why(monkeypatch, tmp_path):
    shim = tmp_path / "python3"  # a python3 outside the system's directories, as a pyenv shim
    shim.write_text("#!/bin/sh\n")
    monkeypatch.setattr(network, "PYTHONS", (str(shim), "/usr/bin/no-such-python3"))
    with pytest.raises(SandboxUnavailable, match="needs the system's python3.*Nothing was run"):
        network.bridged(["/bin/true"], {"PATH": "/usr/bin"})
