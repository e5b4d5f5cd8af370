"""Transcripts written before retention removes their batches
(`runtime/transcript/archive.py`): a file per batch, named safely."""

from __future__ import annotations

import pytest

from runtime.ledger.store import Ledger
from runtime.transcript.archive import exporter, file_name


def test_a_batch_id_that_is_no_safe_file_name_is_hashed():
    assert file_name("b-1.2_x") == "b-1.2_x.jsonl"
    for unsafe in ("../etc/passwd", "a/b", "", ".hidden", "x" * 300):
        name = file_name(unsafe)
        assert name.startswith("batch-") and name.endswith(".jsonl") and "/" not in name


def test_an_unknown_batch_or_a_directory_it_cannot_write_is_an_oserror(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        with pytest.raises(OSError):
            exporter(ledger, tmp_path / "out", b"k")("no-such-batch")
        blocked = tmp_path / "file"
        blocked.write_text("")
        with pytest.raises(OSError):
            exporter(ledger, blocked, b"k")
    finally:
        ledger.close()
