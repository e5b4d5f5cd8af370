"""`toolrun usage`: what calls cost, rolled up from the ledger by submitter,
tool, workspace or day (docs/architecture.md, "Usage and budgets")."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

import typer

from runtime.cli.common import app, choice, fail
from runtime.results import display
from runtime.settings import get_settings
from runtime.usage import spans

BY = ("key", "tool", "workspace", "day", "batch", "status")
COLUMNS = (
    ("calls", "calls"),
    ("ok", "ok"),
    ("worker_seconds", "worker s"),
    ("cpu_seconds", "cpu s"),
    ("queue_seconds", "queue s"),
    ("approval_seconds", "approval s"),
    ("cost", "cost"),
)


def since_of(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return spans.since(text)
    except ValueError as error:
        fail(f"--{error}")


@app.command(help="What calls cost, from the ledger: per key, tool, workspace, day or batch.")
def usage(
    by: Annotated[str, typer.Option(help="key, tool, workspace, day, batch or status.")] = "key",
    since: Annotated[
        str | None, typer.Option(help="Only calls ended since: 7d, 12h, 30m, 2w or a date.")
    ] = None,
    key: Annotated[
        str | None, typer.Option(help="Only this submitter's (key:NAME, or a principal).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON rows, not a table.")] = False,
) -> None:
    from runtime.ledger.store import Ledger

    chosen = choice("--by", by, BY)
    rows = Ledger.from_settings(get_settings()).usage(chosen, since=since_of(since), submitter=key)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    _table(chosen, rows)


def _table(by: str, rows: list[dict]) -> None:
    from rich.measure import Measurement
    from rich.table import Table

    table = Table(title=f"usage by {by}")
    table.add_column(by)
    for _, title in COLUMNS:
        table.add_column(title, justify="right")
    table.add_column("tokens in/out", justify="right")
    for row in rows:
        figures = [_figure(row.get(name)) for name, _ in COLUMNS]
        tokens = ""
        if row.get("input_tokens") is not None or row.get("output_tokens") is not None:
            tokens = f"{row.get('input_tokens') or 0}/{row.get('output_tokens') or 0}"
        table.add_row(str(row[by]), *figures, tokens)
    # At its own width: rich would cut or wrap the names at the terminal's (80
    # columns on a pipe), and the names are what the table is about.
    wide = display.console()
    natural = Measurement.get(wide, wide.options.update_width(10_000), table).maximum
    wide.width = max(wide.width, natural)
    wide.print(table)


def _figure(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
