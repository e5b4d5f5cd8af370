"""A Redis Sentinel group of the test's own: a primary, a replica and three
sentinels (`redis-server --sentinel`), each on a free loopback port, with
passwords for the master and for the sentinels. `kill_primary` SIGKILLs the
primary; the sentinels promote the replica.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
from pathlib import Path

import redis

from runtime.stack.processes import free_port, spawn, stop_process

MASTER = "toolrun"


def available() -> bool:
    return shutil.which("redis-server") is not None


class SentinelGroup:
    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.password = secrets.token_urlsafe(12)  # the master's (and replica's)
        self.sentinel_password = secrets.token_urlsafe(12)
        self.primary_port, self.replica_port = free_port(), free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.pids: dict[int, int] = {}  # port -> pid

    @property
    def url(self) -> str:
        """toolrun's `sentinel://` URL (Celery's form), the master's password in it."""
        return ";".join(
            f"sentinel://:{self.password}@127.0.0.1:{port}/0" for port in self.sentinel_ports
        )

    def _start(self, port: int, config: str, *sentinel: str) -> None:
        path = self.home / f"{port}.conf"
        path.write_text(config)
        binary = shutil.which("redis-server")
        log = self.home / f"{port}.log"
        self.pids[port] = spawn([binary, str(path), *sentinel], log=log, env=os.environ)

    def start(self) -> SentinelGroup:
        self.home.mkdir(parents=True, exist_ok=True)
        for port, extra in (
            (self.primary_port, ""),
            (self.replica_port, f"replicaof 127.0.0.1 {self.primary_port}\n"),
        ):
            folder = self.home / str(port)
            folder.mkdir(exist_ok=True)
            self._start(
                port,
                f'port {port}\nbind 127.0.0.1\ndir {folder}\nsave ""\nappendonly no\n'
                f"requirepass {self.password}\nmasterauth {self.password}\n{extra}",
            )
        for port in (self.primary_port, self.replica_port):
            self._wait(lambda port=port: self.node(port).ping())
        for port in self.sentinel_ports:
            folder = self.home / str(port)
            folder.mkdir(exist_ok=True)
            self._start(
                port,
                f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
                f"requirepass {self.sentinel_password}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary_port} 2\n"
                f"sentinel auth-pass {MASTER} {self.password}\n"
                f"sentinel down-after-milliseconds {MASTER} 1000\n"
                f"sentinel failover-timeout {MASTER} 5000\n"
                f"sentinel parallel-syncs {MASTER} 1\n",
                "--sentinel",
            )
        self._wait(self._replica_in_sync)
        self._wait(lambda: all(len(self.sentinels_known(p)) >= 2 for p in self.sentinel_ports))
        # Each sentinel must know the replica before the primary can be killed:
        # one that has not met it yet has no one to promote.
        self._wait(lambda: all(self._knows_replica(p) for p in self.sentinel_ports))
        return self

    def node(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, password=self.password, socket_timeout=2)

    def sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, password=self.sentinel_password, socket_timeout=2)

    def sentinels_known(self, port: int) -> list:
        return self.sentinel(port).sentinel_sentinels(MASTER)

    def master_port(self) -> int:
        """The master's port as the first sentinel that answers sees it."""
        for port in self.sentinel_ports:
            try:
                return int(self.sentinel(port).sentinel_get_master_addr_by_name(MASTER)[1])
            except redis.RedisError:
                continue
        raise AssertionError("no sentinel answers")

    def _knows_replica(self, port: int) -> bool:
        replicas = self.sentinel(port).sentinel_slaves(MASTER)
        return any(
            int(r["port"]) == self.replica_port and "disconnected" not in r["flags"]
            for r in replicas
        )

    def logs(self, lines: int = 40) -> str:
        """The tail of every node's and sentinel's log, for a failed test's report."""
        found = []
        for path in sorted(self.home.glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            found.append(f"== {path.name}\n" + "\n".join(tail))
        return "\n".join(found)

    def _replica_in_sync(self) -> bool:
        info = self.node(self.replica_port).info("replication")
        return info.get("master_link_status") == "up"

    def kill_primary(self) -> None:
        stop_process(
            self.pids.pop(self.primary_port),
            needles=("redis-server", f":{self.primary_port}"),
            graceful=False,
        )

    def stop(self) -> None:
        for port, pid in list(self.pids.items()):
            stop_process(pid, needles=("redis-server", f":{port}"), graceful=False)
        self.pids.clear()

    def __enter__(self) -> SentinelGroup:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:  # a failed test: what the sentinels did, beside its report
            print(self.logs(), file=sys.stderr)
        self.stop()

    @staticmethod
    def _wait(condition, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except redis.RedisError:
                pass
            assert time.monotonic() < deadline, "the sentinel group did not come up"
            time.sleep(0.1)
