"""`toolrun transcript`: a batch's transcript from the ledger, and `toolrun
transcript verify` of transcript files or of a conversation's chain in the
ledger (docs/architecture.md, "Transcripts")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from runtime.cli.common import app, choice, fail, out
from runtime.settings import get_settings

USAGE = (
    "toolrun transcript BATCH_ID [--format json|jsonl|md|html] [--output FILE]\n"
    "toolrun transcript verify FILE... | verify --conversation ID [--last BATCH_ID]"
)


@app.command(help=f"A batch's transcript from the ledger, sealed; or check transcripts.\n\n{USAGE}")
def transcript(
    what: Annotated[
        list[str], typer.Argument(help="BATCH_ID, or `verify` and the transcript files to check.")
    ],
    format_: Annotated[str, typer.Option("--format", help="json, jsonl, md or html.")] = "json",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write it to FILE, not stdout.")
    ] = None,
    conversation: Annotated[
        str | None,
        typer.Option(help="With verify: check this conversation's chain in the ledger."),
    ] = None,
    last: Annotated[
        str | None,
        typer.Option(help="With verify --conversation: the batch you know to be its last turn."),
    ] = None,
) -> None:
    from runtime import transcript as transcripts

    if what[0] == "verify":
        _verify(what[1:], conversation, last)
        return
    if len(what) != 1 or conversation is not None or last is not None:
        fail(f"usage: {USAGE}")
    chosen = choice("format", format_, transcripts.FORMATS)
    ledger, key = _ledger_and_key()
    document = transcripts.build(ledger, what[0])
    if document is None:
        fail(f"no batch {what[0]!r} in the ledger")
    rows = ledger.rows_check(what[0], key)  # the rows against their seal (docs/architecture.md)
    text = transcripts.render(transcripts.seal(document, key, rows), chosen)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)


def _verify(files: list[str], conversation: str | None, last: str | None) -> None:
    from runtime.transcript import conversation as conversations
    from runtime.transcript import integrity, parse

    if bool(files) == (conversation is not None) or (last is not None and conversation is None):
        fail("verify: give transcript files, or --conversation ID (the ledger's chain)")
    if conversation is not None:
        ledger, key = _ledger_and_key()
        problems = conversations.check(ledger, conversation, key, last)
        turns = len(ledger.turns(conversation))
        _report(problems, f"conversation {conversation}: {turns} turn(s), every link holds")
        return
    key = _key()
    documents, problems = [], []
    for name in files:
        try:
            document = parse(Path(name).read_text())
        except OSError as error:
            fail(f"cannot read {name}: {error.strerror or error}")
        documents.append(document)
        found = integrity.verify(document, key)
        problems += [f"{name}: {p}" for p in found]
        if not found:
            batch = document.get("batch") if isinstance(document.get("batch"), dict) else {}
            out.print(f"{name}: ok (batch {batch.get('id')})", markup=False)
    problems += integrity.links(documents)
    _report(problems, f"{len(files)} transcript(s): digests, HMACs and links hold")


def _report(problems: list[str], fine: str) -> None:
    if problems:
        for problem in problems:
            out.print(f"FAILED {problem}", markup=False)
        raise typer.Exit(1)
    out.print(fine, markup=False)


def _key() -> bytes | None:
    from runtime import config
    from runtime.errors import StackError

    try:
        return config.signing_key(get_settings())
    except StackError:
        return None  # verify says the HMAC was not checked, and fails


def _ledger_and_key():
    from runtime.ledger.store import Ledger

    settings = get_settings()
    key = _key()
    if key is None:
        fail("no signing key: set TOOLRUN_SIGNING_KEY or start the stack (toolrun up)")
    return Ledger.from_settings(settings), key
