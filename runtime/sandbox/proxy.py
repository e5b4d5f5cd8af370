"""The proxy a sandboxed call's processes reach the network through
(docs/architecture.md, "The sandbox"; `runtime.sandbox.network`).

One per call that the org policy lets reach hosts, run by the worker for as long
as the call's process runs, on a unix socket in a private directory. It speaks
the two forms HTTP clients use with a proxy: CONNECT host:port (a tunnel, for
https) and a plain http request with an absolute URI. It reaches a host only if
the policy lists it, and only at addresses the internal-address check admits
(`gate.addresses.connect`: one lookup, every address checked, those connected
to), never toolrun's own Redis, broker or ledger; anything else gets a 403 that
says why.
"""

from __future__ import annotations

import selectors
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import BinaryIO
from urllib.parse import urlsplit

from runtime.errors import AddressRefused
from runtime.gate.addresses import InternalHosts, IPAddress, connect
from runtime.sandbox.network import own_service

MAX_LINE = 8192  # a request or header line
MAX_HEADERS = 100
MAX_CONNECTIONS = 64  # at once, per call
CONNECT_TIMEOUT = 10.0
IDLE_TIMEOUT = 120.0  # a tunnel or request with nothing passing either way ends
HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization"}


class Refused(Exception):
    """A request the proxy answers with `status` and this reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class Proxy:
    """`with Proxy(hosts, internal) as proxy:` serves `proxy.path` until the end
    of the block. `hosts`: what the policy lets the call reach; `internal`: the
    internal hosts and ranges the org policy admits (`internal_hosts`)."""

    def __init__(self, hosts: tuple[str, ...], internal: tuple[str, ...] = ()) -> None:
        self.hosts = InternalHosts.parse(hosts, key="sandbox.network.allow")
        self.internal = InternalHosts.parse(internal)
        self.directory = Path(tempfile.mkdtemp(prefix="toolrun-proxy-"))
        self.path = self.directory / "proxy.sock"
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(self.path))
        self.listener.listen(MAX_CONNECTIONS)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> Proxy:
        self.thread.start()
        return self

    def __exit__(self, kind: type | None, error: object, trace: TracebackType | None) -> None:
        # Wakes the accept at once (no polling): the call's end does not wait on it.
        self.listener.shutdown(socket.SHUT_RDWR)
        self.thread.join()
        self.listener.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def open(self, host: str, port: int) -> socket.socket:
        """A connection to `host`:`port`, or `Refused` saying why there is none."""
        named = self.hosts.names_host(host)
        if not named and not self.hosts.networks:
            raise Refused(403, f"{host} is not among the hosts sandbox.network.allow lists")

        def also(address: IPAddress, port: int) -> str | None:
            if not named and not self.hosts.allows(host, address):
                return f"{host} ({address}) is not among the hosts sandbox.network.allow lists"
            return own_service(address, port)

        try:
            return connect(host, port, self.internal, CONNECT_TIMEOUT, also=also)
        except AddressRefused as refused:
            raise Refused(403, str(refused)) from None
        except OSError as error:
            raise Refused(502, f"cannot reach {host}:{port}: {error}") from None

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # the call ended
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            client.settimeout(IDLE_TIMEOUT)
            if not self.slots.acquire(blocking=False):
                return _answer(client, 503, f"more than {MAX_CONNECTIONS} connections at once")
            try:
                _pass(self, client)
            finally:
                self.slots.release()


def _pass(proxy: Proxy, client: socket.socket) -> None:
    """One client's request answered, or relayed to the host it names and back."""
    try:
        # unbuffered: what the client sends after its headers is relayed, not kept
        upstream, first = _request(proxy, client.makefile("rb", buffering=0))
    except Refused as refused:
        return _answer(client, refused.status, str(refused))
    except (OSError, ValueError) as error:
        return _answer(client, 400, f"not a proxy request: {error}")
    with upstream:
        upstream.settimeout(IDLE_TIMEOUT)
        if first is None:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream.sendall(first)
        _relay(client, upstream)


def _request(proxy: Proxy, reader: BinaryIO) -> tuple[socket.socket, bytes | None]:
    """The connection upstream, and the request to send it first (None: a
    tunnel, which sends nothing of its own)."""
    method, target, version = _line(reader).split()
    headers = []
    while (line := _line(reader)) not in (b"\r\n", b"\n"):
        headers.append(line)
        if len(headers) > MAX_HEADERS:
            raise ValueError(f"more than {MAX_HEADERS} header lines")
    if method == b"CONNECT":
        host, _, port = target.decode("ascii").rpartition(":")
        return proxy.open(host.strip("[]"), int(port)), None
    url = urlsplit(target.decode("ascii"))
    if url.scheme != "http" or not url.hostname:
        raise Refused(400, "a proxy request names http://host/..., or CONNECT host:port")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = [h for h in headers if h.split(b":")[0].strip().lower() not in HOP_BY_HOP]
    request = b" ".join([method, path.encode("ascii"), version]) + b"\r\n"
    request += b"".join(kept) + b"Connection: close\r\n\r\n"
    return proxy.open(url.hostname, url.port or 80), request


def _line(reader: BinaryIO) -> bytes:
    line = reader.readline(MAX_LINE)
    if not line.endswith(b"\n"):
        raise ValueError("a request line or header is cut or too long")
    return line


def _answer(client: socket.socket, status: int, reason: str) -> None:
    body = f"toolrun sandbox proxy: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {'Forbidden' if status == 403 else 'Refused'}\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    try:
        client.sendall(head.encode() + body)
    except OSError:
        pass


def _relay(one: socket.socket, other: socket.socket) -> None:
    """Bytes both ways until both sides are done or nothing passes for IDLE_TIMEOUT."""
    with selectors.DefaultSelector() as selector:
        selector.register(one, selectors.EVENT_READ, other)
        selector.register(other, selectors.EVENT_READ, one)
        open_ = 2
        while open_ and (ready := selector.select(IDLE_TIMEOUT)):
            for key, _ in ready:
                try:
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if data:
                        key.data.sendall(data)
                        continue
                    key.data.shutdown(socket.SHUT_WR)
                except OSError:
                    return
                selector.unregister(key.fileobj)
                open_ -= 1
