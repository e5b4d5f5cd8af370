"""Keeps the workers of an embedded stack alive, as a container restart policy
and healthcheck would: `toolrun up` starts this as one more process of its
stack (`python -m runtime.stack.supervisor HOME`).

Every few seconds it pings the recorded workers through Celery. A worker
whose process is gone is started again; one whose process lives but has
missed `MISSES` pings in a row (stopped, or its main process hung) is killed
and started again. Each replacement is written into the stack record, so
`toolrun down` and `toolrun status` see it. While Redis cannot be reached no
worker can answer, so only dead processes are replaced then.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path

from runtime.settings import Settings, get_settings
from runtime.stack.embedded import start_worker, stop_worker
from runtime.stack.processes import is_alive
from runtime.stack.record import StackRecord, WorkerInfo, load_record
from runtime.transport.app import make_app

log = logging.getLogger("toolrun.supervisor")
CHECK_SECONDS = 2.0  # between two rounds of pings
PING_SECONDS = 2.0  # how long a round waits for answers
MISSES = 3  # pings in a row a live worker may miss before it is replaced


class Supervisor:
    def __init__(
        self, home: Path, settings: Settings, *, check: float = CHECK_SECONDS, misses: int = MISSES
    ) -> None:
        self.home, self.check, self.allowed = Path(home), check, misses
        self.settings = settings
        record = load_record(self.home)
        self.app = make_app(self.settings, redis_url=record.redis_url if record else None)
        self.missed: dict[str, int] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        """Until the stack record is gone or SIGTERM."""
        while not self.stopping.wait(self.check):
            record = load_record(self.home)
            if record is None:
                return
            self.round(record)

    def round(self, record: StackRecord) -> None:
        answered = self._answering([worker["name"] for worker in record.workers])
        for index, worker in enumerate(list(record.workers)):
            if self.stopping.is_set():
                return
            if not self._needs_replacing(worker, answered):
                continue
            replacement = self._replace(record, worker)
            record.workers[index] = replacement
            record.save()

    def _needs_replacing(self, worker: WorkerInfo, answered: set[str] | None) -> bool:
        if not is_alive(worker["pid"]):
            log.warning("worker %s (pid %s) is gone", worker["name"], worker["pid"])
            return True
        if answered is None or worker["name"] in answered:  # Redis down: nobody can answer
            self.missed.pop(worker["name"], None)
            return False
        self.missed[worker["name"]] = self.missed.get(worker["name"], 0) + 1
        if self.missed[worker["name"]] < self.allowed:
            return False
        log.warning("worker %s missed %d pings; killing it", worker["name"], self.allowed)
        return True

    def _replace(self, record: StackRecord, worker: WorkerInfo) -> WorkerInfo:
        if not stop_worker(worker, graceful=False):
            log.warning(
                "worker %s (pid %s) was killed but is not gone yet", worker["name"], worker["pid"]
            )
        self.missed.pop(worker["name"], None)
        index = 1 + sum(w["queue"] == worker["queue"] for w in record.workers)
        replacement = start_worker(
            self.settings, worker["queue"], redis_url=record.redis_url, index=index, wait=False
        )
        log.warning("started %s in place of %s", replacement["name"], worker["name"])
        return replacement

    def _answering(self, names: list[str]) -> set[str] | None:
        """The workers that answered a ping; None if Redis could not be asked."""
        try:
            replies = self.app.control.ping(
                destination=names, timeout=PING_SECONDS, limit=len(names)
            )
        except Exception as error:  # noqa: BLE001 - Redis restarting, say: ask next round
            log.warning("cannot ping the workers: %s", error)
            return None
        return {name for reply in replies for name in reply}


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    supervisor = Supervisor(Path(argv[1]), get_settings())
    signal.signal(signal.SIGTERM, lambda *_: supervisor.stopping.set())
    supervisor.run()


if __name__ == "__main__":
    main(sys.argv)
