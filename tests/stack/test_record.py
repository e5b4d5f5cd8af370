"""The embedded stack's record: readable by its owner only, found again by
another process (`runtime.config` reads its Redis URL and signing key)."""

from __future__ import annotations

import stat

import pytest

from runtime.errors import StackError
from runtime.stack.record import RECORD, StackRecord, load_record


def record(home) -> StackRecord:
    return StackRecord(
        home=home,
        redis_url="redis://:pw@127.0.0.1:1/0",
        database_url="sqlite:///x.db",
        redis_pid=123,
        signing_key="sk",
    )


def test_a_saved_record_is_private_and_loads_as_it_was(tmp_path):
    path = record(tmp_path).save()
    assert path == tmp_path / RECORD and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_record(tmp_path) == record(tmp_path)
    assert load_record(tmp_path / "nowhere") is None


def test_an_unreadable_record_is_a_stack_error_naming_it(tmp_path):
    (tmp_path / RECORD).write_text('{"home": "x"}')
    with pytest.raises(StackError, match=RECORD):
        load_record(tmp_path)
