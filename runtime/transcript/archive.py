"""Transcripts kept as files before their batches leave the ledger: one sealed
JSON Lines transcript per batch, `<directory>/<batch id>.jsonl`
(docs/architecture.md, "Retention"). The file is written whole, then renamed
into place and synced, so a batch is removed only once its transcript is on disk."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path

from runtime.ledger.store import Ledger
from runtime.transcript.document import build
from runtime.transcript.formats import render
from runtime.transcript.integrity import seal

SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}")


def file_name(batch_id: str) -> str:
    """The batch's id, or a hash of it when the id is no safe file name."""
    if SAFE.fullmatch(batch_id):
        return f"{batch_id}.jsonl"
    return f"batch-{hashlib.sha256(batch_id.encode()).hexdigest()[:32]}.jsonl"


def exporter(ledger: Ledger, directory: Path, key: bytes) -> Callable[[str], Path]:
    """A function writing one batch's sealed transcript into `directory`; an
    `OSError` if it cannot (the batch then stays in the ledger)."""
    directory.mkdir(parents=True, exist_ok=True)

    def export(batch_id: str) -> Path:
        document = build(ledger, batch_id)
        if document is None:
            raise FileNotFoundError(f"no batch {batch_id!r} in the ledger")
        path = directory / file_name(batch_id)
        draft = path.with_suffix(".jsonl.part")
        with draft.open("w", encoding="utf-8") as out:
            out.write(render(seal(document, key), "jsonl"))
            out.flush()
            os.fsync(out.fileno())
        draft.replace(path)
        return path

    return export
