"""The embedded stack's HTTP gateway: `toolrun serve` on loopback, started by
`toolrun up` after the workers (docs/architecture.md, "The HTTP gateway")."""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from runtime.errors import StackError
from runtime.settings import Settings
from runtime.stack.processes import died, free_port, is_alive, spawn, stop_process
from runtime.stack.record import GatewayInfo


def start_gateway(settings: Settings, *, env: dict[str, str], timeout: float) -> GatewayInfo:
    """Start the gateway and return once its /healthz answers. Its port is
    TOOLRUN_GATEWAY_PORT when set, else a free one (`toolrun up` prints the URL)."""
    chosen = "gateway_port" in settings.model_fields_set and settings.gateway_port
    port = chosen or free_port()
    log = settings.home.resolve() / "logs" / "gateway.log"
    argv = [sys.executable, "-m", "runtime.cli", "serve", "--host", "127.0.0.1", f"--port={port}"]
    pid = spawn(argv, log=log, env=env)
    gateway = GatewayInfo(url=f"http://127.0.0.1:{port}", pid=pid)
    try:
        _wait_healthy(gateway["url"], pid, log, timeout)
    except BaseException:
        stop_process(pid, needles=needles(gateway))
        raise
    return gateway


def needles(gateway: GatewayInfo) -> tuple[str, ...]:
    return ("runtime.cli", "serve", f"--port={gateway['url'].rsplit(':', 1)[1]}")


def _wait_healthy(url: str, pid: int, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if not is_alive(pid):
            raise died(url, pid, log)
        if time.monotonic() > deadline:
            raise StackError(
                f"the gateway at {url} did not answer within {timeout:.0f} s; see {log}"
            )
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
