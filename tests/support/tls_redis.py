"""A redis-server that speaks only TLS, for the tests of `rediss://`: a CA and
a server certificate made with `openssl` in the test's directory, the server
on a free loopback port. `available()` says whether this machine can."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from runtime.stack.processes import free_port, spawn, stop_process
from tests.support.waiting import wait_for


def available() -> bool:
    """Debian's redis-server is built with TLS; one built without it fails to
    start in `tls_redis`, and says so in its log."""
    return bool(shutil.which("redis-server") and shutil.which("openssl"))


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    ca_key, ca, key, request, cert = (
        folder / name for name in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
    )

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
            "-out", str(ca), "-days", "1", "-subj", "/CN=toolrun test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(request),
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")  # fmt: skip
    openssl("x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", str(cert), "-days", "1",
            "-copy_extensions", "copy")  # fmt: skip
    return ca, cert, key


@contextmanager
def tls_redis(folder: Path) -> Iterator[tuple[str, Path]]:
    """(the server's `rediss://` URL with no TLS option in it, the CA's file)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, cert, key = _certificates(folder)
    port = free_port()
    argv = [
        shutil.which("redis-server") or "redis-server",
        "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
        "--tls-cert-file", str(cert), "--tls-key-file", str(key),
        "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no",
        "--save", "", "--appendonly", "no", "--dir", str(folder),
    ]  # fmt: skip
    pid = spawn(argv, log=folder / "redis.log", env=os.environ)
    url = f"rediss://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url, ssl_ca_certs=str(ca), socket_timeout=2)
        wait_for(lambda: _pings(client), timeout=20, what="the TLS redis-server")
        yield url, ca
    finally:
        stop_process(pid, needles=("redis-server", f":{port}"), graceful=False)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
