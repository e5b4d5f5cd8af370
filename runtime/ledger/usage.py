"""Usage rolled up from the ledger (docs/architecture.md, "Usage and budgets"):
per batch, submitter (a gateway key or a principal), tool, workspace or day,
summed in the database from each call's usage row and, for the model's
tokens, from the batches' rows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, case, func, select

from runtime.ledger.rows import scrub
from runtime.ledger.tables import BatchRow, UsageRow
from runtime.redaction import Redactor
from runtime.types import Status, ToolResult

By = Literal["key", "tool", "workspace", "day", "batch", "status"]
BY: tuple[By, ...] = ("key", "tool", "workspace", "day", "batch", "status")
USAGE, BATCHES = UsageRow.__table__, BatchRow.__table__
FIGURES = ("worker_seconds", "cpu_seconds", "queue_seconds", "approval_seconds", "cost")


def _group(by: By, table: Any) -> Any:
    """The column a rollup groups by, on the usage rows or (tokens) the batches'."""
    when = USAGE.c.at if table is USAGE else BATCHES.c.created_at
    return {
        "key": BATCHES.c.submitter,
        "workspace": BATCHES.c.workspace,
        "day": func.date(when),
        "batch": BATCHES.c.id,
        "tool": USAGE.c.tool,
        "status": USAGE.c.status,
    }[by]


def rollup(
    connection: Connection,
    by: By,
    *,
    since: datetime | None = None,
    submitter: str | None = None,
    batch_id: str | None = None,
) -> list[dict[str, Any]]:
    """One row per group: calls, how many ended ok, worker, CPU, queue and
    approval seconds, money, what tools reported, and (grouped by anything but
    tool or status) the model's tokens. `submitter`: that submitter's only."""
    group = _group(by, USAGE).label("group")
    query = (
        select(
            group,
            func.count().label("calls"),
            func.count(USAGE.c.wall_ms).label("ran"),
            func.sum(case((USAGE.c.status == "ok", 1), else_=0)).label("ok"),
            func.sum(USAGE.c.wall_ms).label("wall_ms"),
            func.sum(USAGE.c.cpu_ms).label("cpu_ms"),
            func.sum(USAGE.c.queue_ms).label("queue_ms"),
            func.sum(USAGE.c.approval_ms).label("approval_ms"),
            func.sum(USAGE.c.cost).label("cost"),
        )
        .select_from(USAGE.join(BATCHES, BATCHES.c.id == USAGE.c.batch_id))
        .group_by(group)
        .order_by(group)
    )
    query = _where(query, USAGE.c.at, since, submitter, batch_id)
    rows: dict[Any, dict[str, Any]] = {}
    for row in connection.execute(query).all():
        rows[row.group] = {
            by: _plain(row.group),
            "calls": row.calls,
            "ran": row.ran,
            "ok": int(row.ok or 0),
            "worker_seconds": _seconds(row.wall_ms),
            "cpu_seconds": _seconds(row.cpu_ms),
            "queue_seconds": _seconds(row.queue_ms),
            "approval_seconds": _seconds(row.approval_ms),
            "cost": round(row.cost, 9) if row.cost is not None else None,
            "reported": {},
        }
    for key, reported in _reported(connection, group, since, submitter, batch_id).items():
        if key in rows:
            rows[key]["reported"] = reported
    if by not in ("tool", "status"):
        for key, tokens in _tokens(connection, by, since, submitter, batch_id).items():
            if key in rows:
                rows[key] |= tokens
    return list(rows.values())


def _where(query: Any, when: Any, since, submitter, batch_id) -> Any:
    if since is not None:
        query = query.where(when >= since)
    if submitter is not None:
        query = query.where(BATCHES.c.submitter == submitter)
    if batch_id is not None:
        query = query.where(BATCHES.c.id == batch_id)
    return query


def _reported(connection: Connection, group: Any, since, submitter, batch_id) -> dict:
    """What tools said they spent, summed per name in each group."""
    query = (
        select(group, USAGE.c.reported)
        .select_from(USAGE.join(BATCHES, BATCHES.c.id == USAGE.c.batch_id))
        .where(USAGE.c.reported.is_not(None))
    )
    sums: dict[Any, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key, reported in connection.execute(_where(query, USAGE.c.at, since, submitter, batch_id)):
        for name, amount in (reported or {}).items():
            if isinstance(amount, int | float):
                sums[key][name] += amount
    return {key: dict(names) for key, names in sums.items()}


def _tokens(connection: Connection, by: By, since, submitter, batch_id) -> dict:
    group = _group(by, BATCHES).label("group")
    query = (
        select(
            group,
            func.sum(BATCHES.c.input_tokens).label("input_tokens"),
            func.sum(BATCHES.c.output_tokens).label("output_tokens"),
        )
        .where(BATCHES.c.input_tokens.is_not(None) | BATCHES.c.output_tokens.is_not(None))
        .group_by(group)
    )
    query = _where(query, BATCHES.c.created_at, since, submitter, batch_id)
    return {
        row.group: {"input_tokens": row.input_tokens, "output_tokens": row.output_tokens}
        for row in connection.execute(query).all()
    }


def _seconds(ms: float | None) -> float:
    return round((ms or 0.0) / 1000, 6)


def _plain(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


def batch_total(connection: Connection, batch_id: str) -> dict[str, Any]:
    """One batch's usage: its calls summed, and its model's tokens."""
    found = rollup(connection, "batch", batch_id=batch_id)
    if found:
        total = found[0]
        total.pop("batch", None)
        return total
    return {"calls": 0, "ran": 0, "ok": 0, **dict.fromkeys(FIGURES, 0.0), "reported": {}}


def tally(
    results: Iterable[ToolResult], tokens: dict[str, Any], redactor: Redactor
) -> dict[str, Any]:
    """`batch_total` summed from the results in hand, with no read: every end
    the ledger holds wrote its usage row from the result it ended with, the
    result a handle streams, so for the same ends the two agree. The gateway's
    `GET /v1/batches/{id}` answers its `usage` so, from the results it returns
    beside it (docs/architecture.md, "Round trips and memory"). `tokens`: the
    model's, as the batch's row holds them."""
    calls = ran = ok = 0
    sums = dict.fromkeys(("wall_ms", "cpu_ms", "queue_ms", "approval_ms"), 0.0)
    cost: float | None = None
    reported: dict[str, float] = defaultdict(float)
    for result in results:
        calls += 1
        ok += result.status is Status.ok
        usage = result.usage
        if usage is None:
            continue
        ran += usage.wall_ms is not None
        for name in sums:
            sums[name] += getattr(usage, name) or 0.0
        if usage.cost is not None:
            cost = (cost or 0.0) + usage.cost
        for name, amount in (scrub(usage.reported, redactor) if usage.reported else {}).items():
            if isinstance(amount, int | float):
                reported[name] += amount
    if calls == 0:
        return {"calls": 0, "ran": 0, "ok": 0, **dict.fromkeys(FIGURES, 0.0), "reported": {}}
    total = {
        "calls": calls,
        "ran": ran,
        "ok": ok,
        "worker_seconds": _seconds(sums["wall_ms"]),
        "cpu_seconds": _seconds(sums["cpu_ms"]),
        "queue_seconds": _seconds(sums["queue_ms"]),
        "approval_seconds": _seconds(sums["approval_ms"]),
        "cost": round(cost, 9) if cost is not None else None,
        "reported": dict(reported),
    }
    given, taken = tokens.get("input_tokens"), tokens.get("output_tokens")
    if given is not None or taken is not None:
        total |= {"input_tokens": given, "output_tokens": taken}
    return total


def totals(connection: Connection) -> list[dict[str, Any]]:
    """Every call ever ended, by tool, submitter and status: calls, worker
    seconds and money (Prometheus counters read them at each scrape)."""
    query = (
        select(
            USAGE.c.tool,
            BATCHES.c.submitter,
            USAGE.c.status,
            func.count().label("calls"),
            func.sum(USAGE.c.wall_ms).label("wall_ms"),
            func.sum(USAGE.c.cost).label("cost"),
        )
        .select_from(USAGE.join(BATCHES, BATCHES.c.id == USAGE.c.batch_id))
        .group_by(USAGE.c.tool, BATCHES.c.submitter, USAGE.c.status)
    )
    return [
        {
            "tool": row.tool,
            "key": row.submitter or "",
            "status": row.status,
            "calls": row.calls,
            "worker_seconds": _seconds(row.wall_ms),
            "cost": row.cost or 0.0,
        }
        for row in connection.execute(query).all()
    ]
