"""Commands of the HTTP gateway: `toolrun serve` and its keys
(docs/architecture.md, "The HTTP gateway")."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Annotated

import typer

from runtime.cli.common import app, check_mode, choice, fail, out
from runtime.settings import get_settings

keys = typer.Typer(help="API keys of the HTTP gateway.", no_args_is_help=True)
app.add_typer(keys, name="keys")

# The `gateway` extra (pyproject.toml): the core install, what `Runtime` and the
# workers need, leaves them out. Keys live in the ledger and need none of them.
GATEWAY_MODULES = ("fastapi", "starlette", "sse_starlette", "uvicorn")
WITHOUT_EXTRA = "the HTTP gateway needs its extra: pip install 'tool-runtime[gateway]'"


def gateway_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in GATEWAY_MODULES)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Default TOOLRUN_GATEWAY_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default TOOLRUN_GATEWAY_PORT.")] = None,
) -> None:
    """Run the HTTP gateway (FastAPI on uvicorn); its OpenAPI document is /openapi.json."""
    try:
        import uvicorn

        from runtime.gateway.app import create_app
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in GATEWAY_MODULES:
            raise
        fail(WITHOUT_EXTRA)
    from runtime.logs import prepare_handlers
    from runtime.redaction import redactor_for

    settings = get_settings()
    logging.basicConfig(level=settings.log_level)
    root = logging.getLogger()
    redactor = redactor_for(settings.redaction_patterns)
    prepare_handlers(root, settings.log_format, redactor)  # redacted, naming batch and call ids
    uvicorn.run(
        create_app(settings),
        host=host or settings.gateway_host,
        port=settings.gateway_port if port is None else port,
        log_config=None,
        # Every request's line at DEBUG (TOOLRUN_LOG_LEVEL); else only the
        # refused ones', written by the gateway's CountRequests: a line per
        # answered request cost the gateway about a tenth of its CPU
        # (docs/architecture.md, "The HTTP gateway").
        access_log=root.isEnabledFor(logging.DEBUG),
        timeout_graceful_shutdown=5,
    )


def _keys():
    from runtime.ledger.keys import Keys
    from runtime.ledger.store import Ledger

    return Keys(Ledger.from_settings(get_settings()))


@keys.command("create")
def keys_create(
    name: str,
    role: Annotated[str, typer.Option(help="submitter, approver, admin or metrics.")],
    workspace_root: Annotated[
        list[str] | None,  # not Path: typer would read "" as "."
        typer.Option(help="A directory the key's batches must be in (repeatable)."),
    ] = None,
    max_mode: Annotated[str | None, typer.Option(help="The most permissive mode allowed.")] = None,
) -> None:
    """Make a key and print its token, once: only its hash is stored."""
    from runtime.gateway.keys import Role, mint
    from runtime.types import Mode

    chosen = Role(choice("role", role, tuple(Role.__members__)))
    mode = Mode(check_mode(max_mode)) if max_mode is not None else None
    roots = list(workspace_root or [])
    for root in roots:
        if not root.strip() or not Path(root).expanduser().is_absolute():
            fail(f"--workspace-root {root!r} is not an absolute path")
        if not Path(root).expanduser().is_dir():
            fail(f"--workspace-root {root} is not a directory")
    print(mint(_keys(), name, chosen, roots=roots, max_mode=mode))


@keys.command("list")
def keys_list() -> None:
    """Every key: name, role, roots, max mode, and whether it is revoked."""
    for row in _keys().all():
        state = f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "live"
        roots = ",".join(row.workspace_roots or []) or "-"
        out.print(
            f"{row.name:<20} {row.role:<10} {state:<24} max mode {row.max_mode or '-':<13}"
            f" roots {roots}",
            markup=False,
        )


@keys.command("revoke")
def keys_revoke(name: str) -> None:
    """Revoke a key: from now on it gets 401."""
    if not _keys().revoke(name):
        fail(f"no live key named {name!r}", code=1)
    out.print(f"revoked {name}", markup=False)
