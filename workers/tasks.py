"""The Celery binding of `runtime.worker.Worker`: one task, and the signals that
build the worker's parts and start its sweep. Nothing here decides anything.

The registry and the signing key are built once in the worker's main process,
before it forks its pool (the children share their pages); each process builds
its own `Worker` (its ledger engine and Redis pool) when it first needs one,
since children must not share the parent's connections."""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os

from billiard.util import get_pdeathsig
from celery import signals
from celery.utils.log import current_process_index
from celery.worker import state

from runtime import sandbox, sessions, tracing
from runtime.keyspace.names import TASK
from runtime.ledger.engine import load_driver
from runtime.redaction import BUILT_IN, redactor_for
from runtime.results.formatter import ledger_summary
from runtime.transport import chain
from runtime.transport.broker import declare_dead_letters, drain_dead_letters
from runtime.worker import Worker, orphans
from runtime.worker.assembly import Parts
from runtime.worker.board import Board, tag_of
from runtime.worker.heartbeat import start_heartbeat
from runtime.worker.sweeper import start_sweeping, sweep_holder
from workers import app
from workers.request import CallRequest, watch_chains

log = logging.getLogger("toolrun.worker")
SWEEP_SECONDS = 1.0  # how often each worker offers to sweep
_parts: list[Parts] = []
_workers: dict[int, Worker] = {}
_holder = sweep_holder()  # this worker's name as the sweep's holder
_board: list[Board] = []


def parts() -> Parts:
    if not _parts:
        _parts.append(Parts.from_env())  # no key, no worker: it would run nothing anyway
    return _parts[0]


def worker() -> Worker:
    """This process's `Worker`."""
    pid = os.getpid()
    if pid not in _workers:
        tracing.configure()  # in each pool process: an exporter's thread does not survive a fork
        _workers[pid] = parts().worker(app)
    return _workers[pid]


def board() -> Board | None:
    """The live board this worker's main process made before forking its pool."""
    return _board[0] if _board else None


class Shown:
    """What Flower shows of a finished task (its task-succeeded event) and what
        Celery's "succeeded" line says it returned: the call's id and status and the
        ledger's summary of its result, redacted and short (a call that did not end
    `ok` is a failed task to Flower: `CallRequest.send_event`). Results travel on
        toolrun's channel and the backend keeps none, so only this text leaves the
        pool process. Celery's `saferepr` walks a dict in Python, about 40 us of a
        pool process's CPU per call; an object's own repr it takes as it is, cut to
        `resultrepr_maxsize` at a word's end (so the status and id come first)."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict) -> None:
        self.fields = fields

    def __repr__(self) -> str:
        return repr(self.fields)


@app.task(name=TASK, bind=True, Request="workers.request:CallRequest")
def execute_call(self, message: dict) -> Shown | None:
    steps = _on_step(self.request.id) if chain.length(message) > 1 else None
    try:
        result = worker().run(message, name=self.request.hostname, on_step=steps)
    finally:
        if steps is not None:
            steps(-1)
    if result is None:  # too malformed to name a call: nobody to answer
        return None
    head = {"status": result.status.value, "call_id": result.call_id}  # status first: SHOWN_OK
    return Shown(head | ledger_summary(result))


@signals.worker_init.connect
def _build_before_forking(**_: object) -> None:
    """Pool processes are forked from this one: load the tools here, then
    freeze what the collector would otherwise visit, so the children share
    those pages instead of each copying them (the registry, pydantic models,
    SQLAlchemy, the ledger's driver, the redactors' detectors; docs/architecture.md,
    "Round trips and memory"). Pool processes record the sessions their calls start
    (`runtime.sessions`); what dead pool processes left is killed here."""
    settings = parts().settings
    _board.append(Board())  # shared with every pool process forked from here on
    sessions.configure(settings.home / "sessions")
    sessions.end_orphans()  # left by the pool processes of a worker that died
    # Checked once here, so pool processes inherit the answer (docs/architecture.md,
    # "The sandbox"); the worker says it once its logging is set up (`_start_sweeping`).
    sandbox.availability(settings.bwrap)
    load_driver(settings.ledger_url)  # each pool process builds its engine on it
    for redactor in (BUILT_IN, redactor_for(settings.redaction_patterns)):
        redactor.found  # noqa: B018 - detect-secrets' plugins, imported and compiled once
    with contextlib.suppress(OSError):  # billiard's cffi parser, else built in each pool process
        get_pdeathsig()
    gc.collect()
    gc.freeze()


@signals.worker_process_init.connect
def _build_in_pool_process(**_: object) -> None:
    worker()


@signals.worker_process_shutdown.connect
def _leave_pool_process(**_: object) -> None:
    sessions.leave()


@signals.worker_ready.connect
def _start_sweeping(sender: object = None, **_: object) -> None:
    """Every worker offers to sweep, one at a time does; and the main process
    renews the leases of the calls its pool runs and watches the time of each
    chain step (`workers/request.py`)."""
    watch_chains(getattr(sender, "pool", None))
    settings = worker().settings
    confined = settings.sandbox and sandbox.availability(settings.bwrap).ok
    (log.info if confined else log.warning)("sandbox: %s", sandbox.state(settings))
    try:
        declare_dead_letters(app)  # RabbitMQ drops a dead letter with nowhere to go
    except Exception as error:  # noqa: BLE001 - the broker away: the first sweep declares it
        log.warning("dead-letter queue not declared yet: %s", error)
    start_sweeping(worker, SWEEP_SECONDS, holder=_holder, first=_end_dead_letters)
    beat = settings.lease_seconds / 4
    start_heartbeat(worker, _running, beat)


@signals.worker_shutdown.connect
def _stop_sweeping(**_: object) -> None:
    """A warm shutdown hands the sweep on at once, not after its lease lapses."""
    try:
        worker().stop_sweeping(_holder)
    except Exception:  # noqa: BLE001 - then it lapses
        pass


def _end_dead_letters() -> None:
    """First in this worker's sweep: end the calls whose messages RabbitMQ gave
    up on (none on Redis)."""
    drain_dead_letters(app, functools.partial(orphans.end_dead_letter, worker()))


def _on_step(task_id: str):
    """What a pool process tells the live board as each step of a chain
    begins (-1: the task has ended)."""
    spot, pid, tag = current_process_index(base=0), os.getpid(), tag_of(task_id)
    found = board()
    if spot is None or found is None:  # not a prefork pool process: nobody reads it
        return lambda index: None

    def step(index: int) -> None:
        if index < 0:
            found.clear(spot, pid)
        else:
            found.begin(spot, pid, tag, index)

    return step


def _running() -> list[object]:
    """The task messages this worker's pool is running (its main process's
    view): of a chain, the step running and the one before it, whose end may
    still be on its way to the ledger."""
    running: list[object] = []
    for request in list(state.active_requests):
        if isinstance(request, CallRequest) and request.steps > 1:
            index, _ = request.step()
            steps = (chain.step_of(request.raw, i) for i in range(max(0, index - 1), index + 1))
            running += [step for step in steps if step is not None]
        elif request.args:
            running.append(request.args[0])
    return running
