"""`toolrun status`: which workers answer and what they run, how long the queues
are, which calls wait for an approval, and whether the ledger's schema is the
newest. Read from the live deployment (Celery's remote control, Redis, the
ledger) each time, never from a cache.

A worker is "down" when the embedded stack recorded it and it does not answer;
a deployment without a record (compose, another machine) lists the workers that
answer, since nothing else says which ones should.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from runtime import sandbox
from runtime.errors import LedgerUnavailable
from runtime.keyspace.names import QUEUES
from runtime.ledger import schema
from runtime.ledger.approvals import Approvals
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.stack.record import load_record
from runtime.transport import broker
from runtime.transport.app import make_app
from runtime.transport.reachability import require_reachable
from runtime.transport.redis_client import state_client


@dataclass(frozen=True)
class ActiveCall:
    tool: str
    batch_id: str | None
    call_id: str | None
    task_id: str


@dataclass(frozen=True)
class WorkerState:
    name: str
    up: bool
    queues: list[str] = field(default_factory=list)
    active: list[ActiveCall] = field(default_factory=list)


@dataclass(frozen=True)
class PendingApproval:
    batch_id: str
    call_id: str
    tool: str
    reason: str


@dataclass(frozen=True)
class Report:
    workers: list[WorkerState]
    queues: dict[str, int]
    pending_approvals: list[PendingApproval] | None  # None: the ledger could not say
    schema_revision: str | None
    schema_head: str | None
    problems: list[str] = field(default_factory=list)
    sandbox: str = ""  # on this machine (docs/architecture.md, "The sandbox")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def collect(settings: Settings, *, timeout: float = 1.0) -> Report:
    """Ask the workers (waiting `timeout` seconds for answers), Redis and the ledger;
    StackError at once if Redis or the broker does not answer."""
    redis_url = require_reachable(settings)
    record = load_record(settings.home)
    recorded = (
        [w["name"] for w in record.workers] if record and record.redis_url == redis_url else []
    )
    app = make_app(settings, redis_url=redis_url)
    client = state_client(settings, redis_url, socket_timeout=5)
    problems: list[str] = []
    try:
        workers = _workers(app, recorded, timeout)
        queues = broker.waiting(app, QUEUES)
        approvals = _pending_approvals(settings, client, problems)
    finally:
        app.close()
        client.close()
    revision, head = _schema(settings, problems)
    return Report(workers, queues, approvals, revision, head, problems, sandbox.state(settings))


def lines(report: Report) -> list[str]:
    """The report as plain lines, for a terminal or a log."""
    out = []
    for worker in report.workers:
        state = "up  " if worker.up else "DOWN"
        queues = ",".join(worker.queues) or "-"
        out.append(f"worker  {state} {worker.name} (queue {queues}, {len(worker.active)} active)")
        for call in worker.active:
            out.append(f"          {call.tool} call {call.call_id} of batch {call.batch_id}")
    if not report.workers:
        out.append("worker  none answered")
    for queue, length in report.queues.items():
        out.append(f"queue   {queue}: {length} waiting")
    if report.pending_approvals is None:
        out.append("approvals unknown (see below)")
    else:
        out.append(f"approvals {len(report.pending_approvals)} pending")
        for item in report.pending_approvals:
            out.append(f"          {item.tool} call {item.call_id} of batch {item.batch_id}")
    if report.schema_revision == report.schema_head:
        out.append(f"ledger  schema at revision {report.schema_revision}")
    else:
        out.append(
            f"ledger  schema at revision {report.schema_revision}, newest is "
            f"{report.schema_head}: run `toolrun db upgrade`"
        )
    out.append(f"sandbox {report.sandbox}")
    out.extend(f"problem {problem}" for problem in report.problems)
    return out


def _workers(app: Any, recorded: list[str], timeout: float) -> list[WorkerState]:
    # With the recorded workers known, stop waiting once they all answered.
    inspect = app.control.inspect(timeout=timeout, limit=len(recorded) or None)
    answered = sorted(inspect.ping() or {})
    if not answered:
        return [WorkerState(name, up=False) for name in recorded]
    # Every worker that answered a ping answers these too; `limit` returns at once.
    inspect = app.control.inspect(destination=answered, timeout=timeout, limit=len(answered))
    queues = inspect.active_queues() or {}
    active = inspect.active(safe=True) or {}  # safe: argsrepr, never the raw arguments
    states = [
        WorkerState(
            name,
            up=True,
            queues=sorted(queue["name"] for queue in queues.get(name, [])),
            active=[_active_call(task) for task in active.get(name, [])],
        )
        for name in answered
    ]
    return states + [WorkerState(name, up=False) for name in recorded if name not in answered]


def _active_call(task: dict[str, Any]) -> ActiveCall:
    """A running task as the call it carries; the dispatcher's argsrepr names its ids."""
    batch_id = call_id = None
    try:
        shown = json.loads(task.get("args") or "[]")[0]
        batch_id, call_id = shown.get("batch_id"), shown.get("call_id")
    except (ValueError, LookupError, TypeError, AttributeError):
        pass
    return ActiveCall(str(task.get("name")), batch_id, call_id, str(task.get("id")))


def _pending_approvals(
    settings: Settings, client: redis.Redis, problems: list[str]
) -> list[PendingApproval] | None:
    ledger = None
    try:
        ledger = Ledger(settings.ledger_url, retry_seconds=2)
        rows = Approvals(ledger, client).pending()
    except (LedgerUnavailable, AttributeError, TypeError) as error:  # an older or newer store
        problems.append(f"pending approvals unknown: {error}")
        return None
    finally:
        if ledger is not None:
            ledger.close()
    return [PendingApproval(row.batch_id, row.call_id, row.tool, row.reason) for row in rows]


def _schema(settings: Settings, problems: list[str]) -> tuple[str | None, str | None]:
    try:
        return schema.current(settings.ledger_url), schema.head()
    except LedgerUnavailable as error:
        problems.append(str(error))
        return None, schema.head()
