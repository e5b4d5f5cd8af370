"""`toolrun mcp serve`: the registry as an MCP server for any MCP client
(docs/architecture.md, "Integrations"); needs the `mcp` extra."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runtime.cli.batch_files import rules_with
from runtime.cli.common import app, check_mode, fail
from runtime.cli.gateway import GATEWAY_MODULES

mcp = typer.Typer(help="toolrun as an MCP server.", no_args_is_help=True)
app.add_typer(mcp, name="mcp")

WITHOUT_EXTRA = "the MCP server needs its extra: pip install 'tool-runtime[mcp]'"


@mcp.command()
def serve(
    mode: Annotated[str, typer.Option(help="plan, default, accept_edits, auto, bypass.")] = (
        "default"
    ),
    workspace: Annotated[
        Path | None, typer.Option(help="Directory the file tools are confined to (default: .).")
    ] = None,
    allow: Annotated[
        list[str] | None, typer.Option(help="A rule the calls are allowed by, e.g. 'bump'.")
    ] = None,
    deny: Annotated[list[str] | None, typer.Option(help="A rule that denies calls.")] = None,
    submitter: Annotated[
        str | None, typer.Option(help="Who the ledger says submitted the calls.")
    ] = None,
    approval_wait: Annotated[
        float,
        typer.Option(help="Seconds a call waits for a person before it answers how to approve."),
    ] = 0.0,
    http: Annotated[
        int | None,
        typer.Option(help="Serve Streamable HTTP on this port (gateway keys), not stdio."),
    ] = None,
    host: Annotated[str, typer.Option(help="The address --http listens on.")] = "127.0.0.1",
) -> None:
    """Serve the registry's tools over stdio (or Streamable HTTP at /mcp, each
    request with a gateway key): each tools/call is a one-call batch through the
    gate, the ledger and the workers."""
    try:
        from runtime.integrations.mcp_server import serve_stdio
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
            raise
        fail(WITHOUT_EXTRA)
    from runtime.cli.common import runtime_for
    from runtime.integrations.batches import Options

    options = Options(
        mode=check_mode(mode),
        workspace=str((workspace or Path.cwd()).resolve()),
        rules=rules_with(None, allow, deny),
        submitter=submitter,
        approval_wait=approval_wait,
    )
    if http is None:
        serve_stdio(runtime_for(), options)
        return
    try:
        from runtime.integrations.mcp_http import serve_http
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in GATEWAY_MODULES:
            raise
        fail(
            "the MCP server over HTTP needs the gateway extra too: "
            "pip install 'tool-runtime[mcp,gateway]'"
        )
    serve_http(runtime_for(), options, host, http)
