"""Commands about batches: run one, list the tools, read the ledger, the demo."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live

from runtime.cli import prompt
from runtime.cli.batch_files import dialects, read_batch, read_message, rules_with
from runtime.cli.board import POLL, Board
from runtime.cli.common import (
    app,
    check_mode,
    choice,
    fail,
    out,
    runtime_for,
)
from runtime.cli.deployment import down, up
from runtime.cli.ledger import ledger as ledger_group
from runtime.results import display
from runtime.settings import get_settings
from runtime.types import ApprovalRequested, Mode, ToolResult


@app.command()
def tools(
    format_: Annotated[
        str | None,
        typer.Option(
            "--format", help="anthropic, openai, responses or mcp: the definitions as JSON."
        ),
    ] = None,
    mode: Annotated[
        str | None, typer.Option(help="Only the tools that can run in this mode.")
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(help="With --mode: under this workspace's trust and rules."),
    ] = None,
) -> None:
    """List the registry: every tool with its risk (with --mode, those that can run)."""
    from runtime import adapters
    from runtime.gate.permissions import offered
    from runtime.gate.policy import PolicySources
    from runtime.tools.loading import load_tools

    settings = get_settings()
    registry = load_tools(settings.module_names, mcp_servers_file=settings.mcp_servers_file)
    specs = list(registry)
    if mode is not None:
        policy = None
        if workspace is not None:
            policy = PolicySources(settings).policy_for(workspace)
        specs = [spec for spec in specs if offered(spec, Mode(check_mode(mode)), policy)]
    if format_ is not None:
        chosen = choice("format", format_, adapters.DEFINITION_FORMATS)
        print(json.dumps(adapters.definitions(specs, chosen), indent=2))
        return
    for spec in specs:
        first = spec.description.splitlines()[0] if spec.description else ""
        flags = "idempotent" if spec.idempotent else ""
        out.print(f"{spec.name:<16} {spec.risk.value:<12} {flags:<11} {first}", markup=False)


@app.command()
def run(
    file: Annotated[
        Path, typer.Argument(help="A JSON batch: a list of calls or {calls, mode, ...}.")
    ],
    mode: Annotated[
        str | None, typer.Option(help="plan, default, accept_edits, auto, bypass.")
    ] = None,
    workspace: Annotated[
        Path | None, typer.Option(help="Directory the file tools are confined to.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {batch_id, results} as JSON.")
    ] = False,
    timeout: Annotated[float | None, typer.Option(help="Seconds the batch may take.")] = None,
    allow: Annotated[
        list[str] | None, typer.Option(help="A rule this batch allows, e.g. 'write_file(*.md)'.")
    ] = None,
    deny: Annotated[list[str] | None, typer.Option(help="A rule this batch denies.")] = None,
    format_: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="anthropic, openai or responses: the file may be that provider's "
            "message; print the reply to send the model, as JSON.",
        ),
    ] = None,
) -> None:
    """Submit a batch and show its results as they finish."""
    dialect = None if format_ is None else choice("format", format_, dialects())
    batch = read_batch(file) if dialect is None else read_message(file, dialect)
    if mode is not None:
        batch["mode"] = check_mode(mode)
    if workspace is not None:
        batch["workspace"] = str(workspace)
    handle = runtime_for().submit(
        batch["calls"],
        mode=batch.get("mode"),
        workspace=batch.get("workspace"),
        on_error=batch.get("on_error"),
        timeout=timeout,
        rules=rules_with(batch.get("rules"), allow, deny),
    )
    results = _follow(handle, quiet=as_json or dialect is not None)
    if dialect is not None:
        from runtime import adapters

        print(json.dumps(adapters.reply(dialect, results, handle.kinds), indent=2))
    elif as_json:
        payload = {
            "batch_id": handle.batch_id,
            "results": [r.model_dump(mode="json") for r in results],
        }
        print(json.dumps(payload, indent=2))
    if results and not any(result.attempts for result in results):  # no worker ran a tool
        ends = Counter(result.status.value for result in results)
        said = ", ".join(f"{status} {count}" for status, count in ends.items())
        fail(f"none of the batch's {len(results)} calls ran ({said})", code=1)


@ledger_group.command("show")
def ledger(
    batch_id: str,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Print a batch's ledger rows: decisions and transitions, in order."""
    from runtime.ledger.store import Ledger

    book = Ledger(get_settings().ledger_url)
    events = book.events(batch_id)
    if not events:
        fail(f"no ledger rows for batch {batch_id!r}")
    if as_json:
        print(json.dumps([row.model_dump(mode="json") for row in events], indent=2, default=str))
    elif out.is_terminal:
        out.print(display.ledger_table(events, f"ledger of batch {batch_id}"))
    else:
        for row in events:
            out.print(display.event_line(row), markup=False)


@app.command()
def demo() -> None:
    """Start the stack, run a sample batch, print its results and ledger, stop."""
    from runtime.stack import demo as sample
    from runtime.stack import embedded as stack

    settings = get_settings()
    started = stack.load_record(settings.home) is None
    if started:
        up()
    runtime = None
    try:
        workspace = sample.prepare_workspace(settings.home / "demo-workspace")
        trusting = sample.trust_file(settings.home, workspace)
        rules = sample.RULES
        out.print(f"\nsample batch in {workspace} (mode auto, rules {rules}):", markup=False)
        for call in sample.CALLS:
            out.print(
                f"  {call['id']}: {call['name']}({json.dumps(call['arguments'])})", markup=False
            )
        runtime = runtime_for(settings.model_copy(update={"user_settings_file": trusting}))
        handle = runtime.submit(
            sample.CALLS, mode="auto", workspace=workspace, timeout=60, rules=rules
        )
        results = _follow(handle, quiet=False)
        out.print(f"\nledger of batch {handle.batch_id}:", markup=False)
        ledger(handle.batch_id, as_json=False)
        missing = [c["id"] for c in sample.CALLS if c["id"] not in {r.call_id for r in results}]
        if missing:
            fail(f"calls without a result: {missing}", code=1)
    finally:
        if runtime is not None:
            runtime.close()  # before the stack stops: its listener would say Redis went away
        if started:
            down()


def _follow(handle, *, quiet: bool) -> list:
    """Show results as they finish, and calls waiting for approval (a live table
    on a TTY; asked there when someone can answer: runtime/cli/prompt.py), return
    the results in order. `quiet`: nothing on stdout but what the caller prints
    after; a waiting call is still said, on stderr."""
    if quiet:
        for event in handle.stream():
            if isinstance(event, ApprovalRequested):
                prompt.say(handle.batch_id, event)
        return handle.results()
    if out.is_terminal:
        _live(handle)
    else:
        out.print(f"batch {handle.batch_id}", markup=False)
        for event in handle.stream():
            out.print(_line(event, handle.batch_id), markup=False)
    return handle.results()


def _live(handle) -> None:
    """The live table (runtime/cli/board.py) until every call has ended,
    asking about each call that waits for a person as it starts to wait."""
    shown = Board(handle.batch_id, [(call.id, call.name) for call in handle.batch.calls])
    asked: set[str] = set()
    with Live(shown.table(), console=out, auto_refresh=False) as live:
        shown.drawn()
        while True:
            done = handle.wait(POLL)
            results, waiting = handle.so_far()
            shown.take(results, waiting, _started(handle) if shown.looks_due() else None)
            if done or shown.due():
                live.update(shown.table(), refresh=True)
                shown.drawn()
            for event in waiting:
                if event.call_id not in asked:
                    asked.add(event.call_id)
                    _waiting(handle, event, live)
            if done:
                return


def _started(handle) -> set[str] | None:
    """The calls of the batch a worker has taken; None if Redis cannot say now."""
    from runtime.errors import StateUnavailable

    try:
        return handle.services.transport.started(handle.batch_id)
    except StateUnavailable:
        return None


def _waiting(handle, event: ApprovalRequested, live: Live) -> None:
    if not prompt.interactive(out):
        live.console.print(prompt.waiting_line(handle.batch_id, event), markup=False)
        return
    live.stop()  # the question and its answer need the terminal to themselves
    try:
        prompt.ask(handle, event, out)
    finally:
        live.start()


def _line(event: ToolResult | ApprovalRequested, batch_id: str) -> str:
    if isinstance(event, ApprovalRequested):
        return prompt.waiting_line(batch_id, event)
    return display.result_line(event)


@app.command()
def cancel(
    batch_id: str,
    by: Annotated[str, typer.Option(help="Who cancels.")] = os.environ.get("USER", "cli"),
) -> None:
    """Cancel a batch: calls not started end cancelled, running ones finish or are abandoned."""
    runtime_for().cancel(batch_id, by=by)
    out.print(f"cancelled batch {batch_id}")


@app.command()
def watch(
    batch_id: str,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {batch_id, results} as JSON.")
    ] = False,
) -> None:
    """Follow a batch submitted from any process, alive or not: the results that
    have ended, then those still to come."""
    from runtime.errors import InvalidBatch

    try:
        handle = runtime_for().attach(batch_id)
    except InvalidBatch as error:
        fail(str(error))
    results = _follow(handle, quiet=as_json)
    if as_json:
        payload = {"batch_id": batch_id, "results": [r.model_dump(mode="json") for r in results]}
        print(json.dumps(payload, indent=2))
