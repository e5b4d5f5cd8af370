"""The network a sandboxed process may reach (docs/architecture.md, "The sandbox"):
none, unless the org policy lists hosts (`"sandbox": {"network": {"allow": [...]}}`);
then only those, through the call's proxy (`runtime.sandbox.proxy`), never toolrun's
own Redis, broker or ledger.

The process keeps its own network namespace, loopback only. A bridge inside it
(a small `python3` program from the system's read-only /usr, started before the
command and ending with it) listens on 127.0.0.1:PORT and passes every
connection to the proxy's unix socket, which is mounted into the sandbox; the
command's environment names the bridge as its HTTP and HTTPS proxy.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from runtime import config
from runtime.errors import SandboxUnavailable
from runtime.gate.addresses import IPAddress
from runtime.settings import get_settings

PORT = 3128  # the bridge's, in the sandbox's own loopback: no other process has it
SOCKET = "/tmp/.toolrun-proxy.sock"  # where the proxy's socket is, inside the sandbox
PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
SYSTEM = ("/usr/", "/bin/", "/lib/")  # mounted in the sandbox (`view.SYSTEM`)
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")
DEFAULT_PORTS = {"redis": 6379, "rediss": 6379, "amqp": 5672, "amqps": 5671, "sentinel": 26379}
DEFAULT_PORTS |= {"postgresql": 5432, "postgres": 5432, "mysql": 3306}

# The bridge: argv is [socket, port, command...]. It listens before the command
# starts, so the command never finds the proxy missing, and exits with its code.
# Only modules built into the interpreter (`_socket`, `_thread`, `os`): it starts
# in the time python3 itself takes, not the tens of ms `socket` and `subprocess` add.
BRIDGE = """
import _socket as s, _thread as t, os, sys
path, port, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
listener = s.socket(s.AF_INET, s.SOCK_STREAM)
listener.setsockopt(s.SOL_SOCKET, s.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)
def pipe(source, sink, done=None):
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    try:
        sink.shutdown(s.SHUT_WR)
    except OSError:
        pass
    if done:
        done.release()
def serve(client):
    upstream = s.socket(s.AF_UNIX, s.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    done = t.allocate_lock()
    done.acquire()
    t.start_new_thread(pipe, (upstream, client, done))
    pipe(client, upstream)
    done.acquire()
    client.close()
    upstream.close()
def accept():
    while True:
        fd, _ = listener._accept()
        t.start_new_thread(serve, (s.socket(s.AF_INET, s.SOCK_STREAM, 0, fd),))
child = os.fork()
if child == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
t.start_new_thread(accept, ())
code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
sys.exit(code if code >= 0 else 128 - code)
"""


def allowed(policy: Mapping) -> tuple[str, ...]:
    """The hosts a batch's policy (its signed snapshot) lets its sandboxed
    processes reach: the org policy's `sandbox.network.allow`; none by default."""
    network = (policy.get("sandbox") or {}).get("network") or {}
    return tuple(network.get("allow", ()))


def bridged(argv: list[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """`argv` started behind the bridge, and the environment that sends its
    HTTP(S) through it. `SandboxUnavailable` if the system has no python3."""
    python = _system_python()
    if python is None:
        raise SandboxUnavailable(
            "not run: the org policy lets this call's processes reach the network, through a "
            "bridge that needs the system's python3 (/usr/bin/python3), and there is none. "
            "Nothing was run. An operator can install python3, or remove sandbox.network."
        )
    proxy = f"http://127.0.0.1:{PORT}"
    environment = {**env, **dict.fromkeys(PROXY_VARIABLES, proxy), "NO_PROXY": "", "no_proxy": ""}
    return [python, "-I", "-S", "-c", BRIDGE, SOCKET, str(PORT), *argv], environment


def _system_python() -> str | None:
    """A python3 that the sandbox has: in the system's directories, links and all
    (a PATH's python3 may be a shim in a home, which the sandbox does not show)."""
    for candidate in PYTHONS:
        if os.path.isfile(candidate) and os.path.realpath(candidate).startswith(SYSTEM):
            return candidate
    return None


def mounts(socket_path: Path) -> list[str]:
    """bubblewrap's options that show the proxy's socket inside the sandbox."""
    return ["--ro-bind", str(socket_path), SOCKET]


def own_service(address: IPAddress, port: int) -> str | None:
    """Why `address`:`port` is never reached: it is toolrun's Redis, broker or
    ledger. A loopback or unspecified address counts as any other loopback one."""
    for name, (addresses, service_port) in _services().items():
        if port != service_port:
            continue
        if address in addresses or (_local(address) and any(_local(a) for a in addresses)):
            return (
                f"{address}:{port} is toolrun's own {name}; a sandboxed process never reaches "
                "it, whatever the policy lists"
            )
    return None


def _local(address: IPAddress) -> bool:
    inner = getattr(address, "ipv4_mapped", None) or address
    return inner.is_loopback or inner.is_unspecified


@lru_cache(maxsize=1)
def _services() -> dict[str, tuple[frozenset[IPAddress], int]]:
    """toolrun's Redis, broker and ledger: their addresses and ports, found once
    per process from the worker's settings."""
    settings = get_settings()
    urls = {
        "Redis": config.redis_url(settings, required=False) or "",
        "broker": config.broker_url(settings),
        "ledger": settings.ledger_url,
    }
    found = {}
    for name, url in urls.items():
        for index, part in enumerate(url.split(";")):
            place = _place(part.strip())
            if place is not None:
                found[f"{name} ({index + 1})" if index else name] = place
    return found


def _place(url: str) -> tuple[frozenset[IPAddress], int] | None:
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0].lower()
    try:
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None  # SQLite, a unix socket: no address to reach
    try:
        infos = socket.getaddrinfo(parts.hostname, port, 0, socket.SOCK_STREAM)
    except OSError:
        infos = []
    addresses = {ipaddress.ip_address(info[4][0].partition("%")[0]) for info in infos}
    try:
        addresses.add(ipaddress.ip_address(parts.hostname))
    except ValueError:
        pass
    return frozenset(addresses), port
