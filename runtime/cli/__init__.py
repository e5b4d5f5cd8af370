"""`toolrun`, the command line. Importing the command modules registers them."""

from runtime.cli import approvals, batches, deployment, gateway  # noqa: F401  (registers commands)
from runtime.cli.common import app


def main() -> None:
    app()


__all__ = ["app", "main"]
