"""A gateway the tests do not share a process with: `toolrun serve` in a
subprocess on the session's stack, and keys made in its ledger."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from runtime.gateway.keys import Role, mint
from runtime.ledger.keys import Keys
from runtime.ledger.store import Ledger
from runtime.stack.processes import free_port
from runtime.stack.record import StackRecord
from runtime.types import Mode
from tests.support.cli import REPO, SCRIPT, stack_env

STARTUP_SECONDS = 60


@dataclass
class Gateway:
    url: str
    log: Path
    ledger: Ledger

    def key(
        self,
        name: str,
        role: Role,
        *,
        roots: list[Path] | None = None,
        max_mode: Mode | None = None,
    ) -> str:
        return mint(
            Keys(self.ledger), name, role, roots=[str(r) for r in roots or []], max_mode=max_mode
        )

    def client(self, token: str | None = None, **options) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, **options)


@contextlib.contextmanager
def running_gateway(
    stack: StackRecord, user_settings: Path, log: Path, **settings: str
) -> Iterator[Gateway]:
    """`toolrun serve` on a free port, ready (its /healthz answers); stopped after."""
    port = free_port()
    env = stack_env(stack, user_settings) | settings
    argv = [SCRIPT or "toolrun", "serve", "--port", str(port)]
    with open(log, "ab") as out:
        process = subprocess.Popen(
            argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    ledger = Ledger(stack.database_url)
    try:
        _wait_ready(process, url, log)
        yield Gateway(url=url, log=log, ledger=ledger)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        ledger.close()


def _wait_ready(process: subprocess.Popen, url: str, log: Path) -> None:
    limit = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < limit:
        if process.poll() is not None:
            raise RuntimeError(f"the gateway exited: {log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(
        f"the gateway did not answer in {STARTUP_SECONDS} s: {log.read_text()[-3000:]}"
    )


def sse(response: httpx.Response) -> Iterator[dict]:
    """Server-Sent Events of a streamed response, as dicts of their fields."""
    event: dict = {}
    for line in response.iter_lines():
        if not line:
            if event:
                yield event
            event = {}
            continue
        if line.startswith(":"):
            continue  # a ping
        field, _, value = line.partition(":")
        event[field] = value.removeprefix(" ")
