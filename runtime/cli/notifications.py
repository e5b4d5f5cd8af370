"""`toolrun notifications`: the org's approval webhooks, and the key their
receivers check signatures with (docs/architecture.md, "Approval notifications")."""

from __future__ import annotations

import typer

from runtime.cli.common import app, out

notifications = typer.Typer(
    help="Who is told when a call waits for approval.", no_args_is_help=True
)
app.add_typer(notifications, name="notifications")


@notifications.command("list")
def listing() -> None:
    """The notifiers the org policy declares (names and formats; never the URLs)."""
    from runtime.gate.policy import org_notifiers
    from runtime.settings import get_settings

    found = org_notifiers(get_settings())
    if not found:
        out.print("no notifiers: the org policy (TOOLRUN_POLICY_FILE) declares none")
    for notifier in found:
        answers = notifier.gateway_url or "commands only"
        out.print(f"{notifier.name:<20} {notifier.format:<6} answers: {answers}", markup=False)


@notifications.command()
def key() -> None:
    """The hex key receivers check `X-Toolrun-Signature` with: HMAC-SHA256 of
    `<X-Toolrun-Timestamp>.<body>` under these bytes."""
    from runtime.config import signing_key
    from runtime.keyring import Purpose, derived
    from runtime.settings import get_settings

    print(derived(signing_key(get_settings()), Purpose.notification).hex())
