"""`toolrun rules`: the allow rules people remembered while answering
approvals, and taking one back (docs/architecture.md, "Remembered rules")."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any

import typer

from runtime.cli.common import app, fail, out

rules = typer.Typer(help="Rules remembered from approvals (approve --remember).")
app.add_typer(rules, name="rules")


@rules.callback(invoke_without_command=True)
def listing(
    context: typer.Context,
    revoked: Annotated[bool, typer.Option("--all", help="Revoked rules too.")] = False,
) -> None:
    """List the remembered rules: id, rule, scope, who added it and when."""
    if context.invoked_subcommand is not None:
        return
    from runtime.ledger.remembered import RememberedRules
    from runtime.ledger.store import Ledger
    from runtime.settings import get_settings

    rows = RememberedRules(Ledger(get_settings().ledger_url)).listing(revoked=revoked)
    if not rows:
        out.print("no remembered rules")
    for row in rows:
        gone = (
            f"  revoked by {row.revoked_by} {row.revoked_at:%Y-%m-%d %H:%M}"
            if row.revoked_at
            else ""
        )
        out.print(
            f"{row.id:<4} allow {row.rule}  for {row.scope} {row.scope_value}  "
            f"added by {row.added_by} {row.added_at:%Y-%m-%d %H:%M:%S} (call {row.call_id} "
            f"of batch {row.batch_id}){gone}",
            markup=False,
        )


@rules.command()
def revoke(
    rule_id: int,
    by: Annotated[str, typer.Option(help="Who revokes.")] = os.environ.get("USER", "cli"),
) -> None:
    """Take a remembered rule back: batches submitted from now on are asked again."""
    from runtime.ledger.remembered import RememberedRules
    from runtime.ledger.store import Ledger
    from runtime.settings import get_settings

    if not RememberedRules(Ledger(get_settings().ledger_url)).revoke(rule_id, by=by):
        fail(f"no remembered rule {rule_id} is in force (unknown, or revoked already)", code=1)
    out.print(f"revoked rule {rule_id}")


def remembering(
    runtime: Any, batch_id: str, call_id: str, scope: str, rule: str | None, by: str, updated: Any
) -> tuple[Callable[[], bool], list]:
    """`toolrun approve --remember`: the answer to give, and the list the rule
    it remembered lands in. The CLI holds the ledger and the signing key, so it
    answers as an admin would and may remember a rule wider than the call."""
    from runtime.gate.remembering import RememberRefused

    kept: list = []

    def answered() -> bool:
        try:
            row = runtime.remember(
                batch_id,
                call_id,
                scope=scope,
                by=by,
                rule=rule,
                may_widen=True,
                updated_arguments=updated,
                kept=kept,
            )
        except RememberRefused as error:
            fail(f"cannot remember a rule: {error}")
        return row is not None

    return answered, kept


def said(row: Any) -> str:
    return f"remembered rule {row.id}: allow {row.rule} for {row.scope} {row.scope_value}"
