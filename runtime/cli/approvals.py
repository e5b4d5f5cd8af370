"""Commands a human uses to answer the permission gate: approvals and trust."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from runtime.cli.common import (
    app,
    fail,
    out,
    runtime_for,
)
from runtime.errors import StateUnavailable
from runtime.settings import get_settings


@app.command()
def approvals(batch: Annotated[str | None, typer.Option(help="Only this batch.")] = None) -> None:
    """List the calls waiting for approval, from the ledger."""
    rows = runtime_for(answering=False).pending_approvals(batch)
    if not rows:
        out.print("no calls are waiting for approval")
    for row in rows:
        out.print(
            f"{row.call_id}  {row.tool:<14} batch {row.batch_id}  expires "
            f"{row.expires_at:%H:%M:%S}  {row.reason}  {json.dumps(row.arguments)}",
            markup=False,
        )


@app.command()
def approve(
    call_id: str,
    batch: Annotated[
        str | None, typer.Option(help="The batch, if the call id is ambiguous.")
    ] = None,
    by: Annotated[str, typer.Option(help="Who approves.")] = os.environ.get("USER", "cli"),
    arguments: Annotated[str | None, typer.Option(help="Updated arguments, as JSON.")] = None,
    remember: Annotated[
        str | None,
        typer.Option(
            help="And allow calls like it from now on: for this 'workspace' or 'submitter'."
        ),
    ] = None,
    rule: Annotated[
        str | None,
        typer.Option(help="With --remember: the allow rule (default: the narrowest for the call)."),
    ] = None,
) -> None:
    """Let a waiting call run, optionally with updated arguments, and (--remember)
    allow calls like it from now on."""
    runtime = runtime_for(answering=False)  # the answer is the ledger's
    row = _pending(runtime, call_id, batch)
    updated = None
    if arguments is not None:
        try:
            updated = json.loads(arguments)
        except json.JSONDecodeError as error:
            fail(f"--arguments is not valid JSON: {error.msg}")
    said = f"approved {call_id} of batch {row.batch_id}"
    if remember is not None:
        from runtime.cli import rules

        answered, kept = rules.remembering(
            runtime, row.batch_id, call_id, remember, rule, by, updated
        )
        _answer(answered, call_id, said)
        for remembered in kept:
            out.print(rules.said(remembered), markup=False)
        return
    if rule is not None:
        fail("--rule goes with --remember")
    _answer(
        lambda: runtime.approve(row.batch_id, call_id, by=by, updated_arguments=updated),
        call_id,
        said,
    )


@app.command()
def deny(
    call_id: str,
    reason: Annotated[str, typer.Option(help="Why: the model reads it.")],
    batch: Annotated[
        str | None, typer.Option(help="The batch, if the call id is ambiguous.")
    ] = None,
    by: Annotated[str, typer.Option(help="Who denies.")] = os.environ.get("USER", "cli"),
) -> None:
    """Refuse a waiting call; the model gets a denied result with the reason."""
    runtime = runtime_for(answering=False)  # the answer is the ledger's
    row = _pending(runtime, call_id, batch)
    said = f"denied {call_id} of batch {row.batch_id}"
    _answer(lambda: runtime.deny(row.batch_id, call_id, reason, by=by), call_id, said)


def _answer(answered: Callable[[], bool], call_id: str, said: str) -> None:
    """Store the answer and carry the batch on. The answer is in the ledger
    before Redis is touched, so with Redis away it stands: the sweep carries
    the batch on once Redis is back (docs/architecture.md, "A batch the
    cluster owns"), and that is all the user needs to read."""
    try:
        with _unlogged("toolrun.batch"):  # its warnings say what the line below says
            if not answered():
                fail(f"call {call_id} is no longer waiting (answered or expired)", code=1)
    except StateUnavailable:
        out.print(
            f"{said}: the answer is stored; Redis cannot be reached now, so the batch "
            "goes on once Redis is back",
            markup=False,
        )
        return
    out.print(said)


@contextmanager
def _unlogged(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _pending(runtime, call_id: str, batch: str | None):
    rows = [row for row in runtime.pending_approvals(batch) if row.call_id == call_id]
    if not rows:
        asked = runtime.deployment.approvals.find(call_id, batch)
        if any(row.status == "expired" or row.status == "pending" for row in asked):
            fail(
                f"the approval of call {call_id!r} expired; it can no longer be answered "
                "and the call ends denied",
                code=1,
            )
        if asked:
            fail(f"call {call_id!r} was answered already ({asked[0].status})", code=1)
        fail(f"no call {call_id!r} is waiting for approval")
    if len(rows) > 1:
        fail(f"call id {call_id!r} waits in several batches; name one with --batch")
    return rows[0]


@app.command()
def trust(directory: Path) -> None:
    """Trust a workspace and what is under it, so tools other than reads run there."""
    settings = get_settings()
    path = settings.user_settings_file.expanduser()
    data = json.loads(path.read_text()) if path.exists() else {}
    entries = data.setdefault("trusted_workspaces", [])
    target = str(directory.expanduser().resolve())
    if target not in entries:
        entries.append(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    out.print(f"trusted {target} in {path}", markup=False)
