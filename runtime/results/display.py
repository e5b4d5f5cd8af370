"""How results and ledger rows look on a terminal: rich tables on a TTY, plain
lines otherwise (logs, CI, pipes)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from runtime.types import Status, ToolResult

STYLE = {Status.ok: "green", Status.skipped: "yellow", Status.awaiting_approval: "yellow"}


def result_line(result: ToolResult) -> str:
    return f"{result.call_id}  {result.status.value:<17} {result.summary}"


def results_table(results: Iterable[ToolResult], title: str = "results") -> Table:
    table = Table(title=title, expand=False)
    for column in ("call", "tool", "status", "ms", "worker", "summary"):
        table.add_column(column, overflow="fold")
    for result in results:
        add_result(table, result)
    return table


def add_result(table: Table, result: ToolResult) -> None:
    """One ended call as a row of `results_table`."""
    style = STYLE.get(result.status, "red")
    table.add_row(
        result.call_id,
        result.tool,
        f"[{style}]{result.status.value}[/]",
        f"{result.duration_ms:.0f}",
        result.worker or "",
        result.summary,
    )


def ledger_table(events: Iterable, title: str) -> Table:
    table = Table(title=title, expand=False)
    for column in ("#", "call", "event", "status/effect", "rule", "worker", "detail"):
        table.add_column(column, overflow="fold")
    for row in events:
        detail = row.reason or ((row.detail or {}).get("summary") if row.detail else "") or ""
        table.add_row(
            str(row.id),
            row.call_id or "",
            row.kind,
            row.status or row.effect or "",
            row.rule or "",
            row.worker or "",
            detail[:100],
        )
    return table


def event_line(row) -> str:
    what = row.status or row.effect or ""
    detail = row.reason or ((row.detail or {}).get("summary") if row.detail else "") or ""
    call = row.call_id or "-"
    return f"{row.id:>5} {call:<10} {row.kind:<18} {what:<12} {row.rule or '':<14} {detail}"


def console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=True)
