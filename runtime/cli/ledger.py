"""`toolrun ledger prune`: remove ended batches older than the retention period,
whole, exporting each one's transcript first if asked, and give their space
back (docs/architecture.md, "Retention")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import click
import typer
from typer.core import TyperGroup

from runtime.cli.common import app, fail, out
from runtime.settings import get_settings


class _Ledger(TyperGroup):
    """`toolrun ledger BATCH_ID` shows a batch's rows, as it did before the
    group had subcommands: a first word that names none is `show`'s."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


ledger = typer.Typer(
    cls=_Ledger,
    no_args_is_help=True,
    help="A batch's ledger rows (`toolrun ledger BATCH_ID`), and retention "
    "(`toolrun ledger prune`).",
)
app.add_typer(ledger, name="ledger")


@ledger.command("prune")
def prune(
    days: Annotated[
        float | None,
        typer.Option(
            help="Remove batches ended more than this many days ago (default: the org "
            "policy file's retention.days, else TOOLRUN_RETENTION_DAYS)."
        ),
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option(
            help="Write each batch's sealed JSON Lines transcript here first (default: "
            "the org policy file's retention.export, else TOOLRUN_RETENTION_EXPORT)."
        ),
    ] = None,
    vacuum: Annotated[
        bool,
        typer.Option(
            help="SQLite: rewrite the whole file (VACUUM), holding the write "
            "lock throughout; needed once on a ledger made before incremental auto-vacuum."
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would go; remove nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object, not a sentence.")
    ] = False,
) -> None:
    """Remove batches that ended more than the retention period ago, whole,
    exporting each one's transcript first if asked; give their space back.
    The period is the org policy file's `retention` when it sets one, else
    the deployment's; `--days` and `--export` win over both."""
    from runtime.gate.policy import org_retention
    from runtime.ledger import retention
    from runtime.ledger.store import Ledger

    settings = get_settings()
    chosen = org_retention(settings)
    source = "--days" if days is not None else chosen.source
    days = days if days is not None else chosen.days
    if days is None or days <= 0:
        fail(
            "no retention period: give --days N, or set retention in the org policy "
            "file or TOOLRUN_RETENTION_DAYS"
        )
    found = Ledger.from_settings(settings)
    before = retention.cutoff(days)
    if dry_run:
        count = len(retention.due(found, before, limit=10**9))
        out.print(f"{count} batch(es) ended before {before.isoformat()} would go", markup=False)
        return
    directory = export or chosen.export
    writer = None
    if directory is not None:
        from runtime import config
        from runtime.transcript.archive import exporter

        writer = exporter(found, directory, config.signing_key(settings))
    size = retention.size(found)
    pruned = retention.prune(found, before, export=writer, full_vacuum=vacuum)
    after = retention.size(found)
    shown = vars(pruned) | {"size_before": size, "size_after": after, "before": before.isoformat()}
    shown["period_from"] = source
    if as_json:
        typer.echo(json.dumps(shown))
    else:
        out.print(
            f"removed {pruned.batches} batch(es) ended before {before.isoformat()}"
            + (f", their transcripts in {directory}" if directory else "")
            + f"; {pruned.reclaimed}; {size:,} -> {after:,} bytes in {pruned.seconds:g} s",
            markup=False,
        )
    if pruned.failed_exports:
        fail(f"{pruned.failed_exports} batch(es) kept: their transcripts could not be written", 1)
