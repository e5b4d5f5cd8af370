"""The soak's faults: one every few seconds, every kind once per round, in a
random order. Those that take a while (a race of submitter processes, a
process started under a locked ledger, a backed-up queue) run on threads
of their own, so the next fault is not held up."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from tests.soak.backlog import back_up_effects
from tests.soak.keys import race_keyed_submits
from tests.soak.locked_start import locked_start
from tests.soak.long_effects import freeze_effects_main, restart_under_long_effects
from tests.soak.sweep_holder import kill_sweep_holder, stranded_by_the_dead
from tests.soak.tally import Tally

FAULTS = [
    "kill reads worker",
    "kill effects worker",
    "kill pool process",
    "restart redis",
    "cut ledger",
    "kill sweep holder",
    "race keyed submits",
    "lock ledger at process start",
    "back up effects queue",
    "freeze effects main process",
    "restart redis under long side effects",
]
EVERY = (3.0, 7.0)  # seconds between two faults
THREADED = {
    "race keyed submits": race_keyed_submits,
    "lock ledger at process start": locked_start,
    "freeze effects main process": freeze_effects_main,
}


class Injector:
    def __init__(self, stack, runtime, base: Path, tally: Tally, slots: int) -> None:
        self.stack, self.runtime, self.base, self.tally = stack, runtime, base, tally
        self.slots = slots

    def run(self, stop: threading.Event, rng: random.Random) -> None:
        round_: list[str] = []
        while not stop.wait(rng.uniform(*EVERY)):
            round_ = round_ or rng.sample(FAULTS, len(FAULTS))
            fault = round_.pop()
            if not self.ready(fault):  # its target is down (a replacement is starting)
                round_.insert(0, fault)
                continue
            with self.tally.lock:
                self.tally.in_flight_at_faults += self.tally.in_flight
            try:
                self.inject(fault, random.Random(rng.random()))
            except Exception as error:  # noqa: BLE001 - a fault that could not be injected
                self.tally.error(f"{fault}: {type(error).__name__}: {error}")
                continue
            with self.tally.lock:
                self.tally.faults[fault] += 1
            in_flight = self.tally.in_flight
            print(
                f"  {time.strftime('%H:%M:%S')} {fault}; calls in flight: {in_flight}", flush=True
            )

    def ready(self, fault: str) -> bool:
        stack = self.stack
        if fault == "kill reads worker":
            return bool(stack.workers("reads"))
        if fault == "kill effects worker":
            return bool(stack.workers("effects"))
        if fault == "kill pool process":
            workers = stack.workers("reads") + stack.workers("effects")
            return any(stack.pool_processes(w) for w in workers)
        if fault == "kill sweep holder":
            return stranded_by_the_dead(stack, self.tally)
        return True

    def inject(self, fault: str, rng: random.Random) -> None:
        stack = self.stack
        if fault == "kill reads worker":
            stack.kill_worker(rng.choice(stack.workers("reads")))
        elif fault == "kill effects worker":
            stack.kill_worker(rng.choice(stack.workers("effects")))
        elif fault == "kill pool process":
            workers = stack.workers("reads") + stack.workers("effects")
            pids = [pid for w in workers for pid in stack.pool_processes(w)]
            stack.kill_pool_process(rng.choice(pids))
        elif fault == "restart redis":
            stack.restart_redis(down=rng.uniform(0.2, 2.0))
        elif fault == "cut ledger":
            with stack.ledger_cut():
                time.sleep(rng.uniform(1.0, 4.0))
        elif fault == "kill sweep holder":
            kill_sweep_holder(stack, self.tally)
        elif fault == "restart redis under long side effects":
            restart_under_long_effects(stack, self.runtime, self.base, self.tally, rng)
        elif fault == "back up effects queue":
            back_up_effects(stack, self.runtime, self.base, self.tally, rng, self.slots)
        else:
            self.tally.spawn(self._guarded, fault, rng)

    def _guarded(self, fault: str, rng: random.Random) -> None:
        try:
            THREADED[fault](self.stack, self.runtime, self.base, self.tally, rng)
        except Exception as error:  # noqa: BLE001 - counted, and the soak goes on
            self.tally.error(f"{fault}: {type(error).__name__}: {error}")
