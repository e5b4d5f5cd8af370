"""`toolrun`, the command line. Importing the command modules registers them."""

from runtime.cli import (  # noqa: F401  (registers commands)
    approvals,
    batches,
    deployment,
    gateway,
    ledger,
    mcp_server,
    notifications,
    rules,
    transcripts,
    usage,
)
from runtime.cli.common import app


def main() -> None:
    app()


__all__ = ["app", "main"]
