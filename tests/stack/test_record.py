"""The embedded stack's record: readable by its owner only, found again by
clients for the Redis URL and the signing key."""

from __future__ import annotations

import stat

import pytest
from pydantic import SecretStr

from runtime.errors import StackError
from runtime.settings import Settings
from runtime.stack.record import (
    RECORD,
    StackRecord,
    load_record,
    redis_url_for,
    signing_key_for,
)


def record(home) -> StackRecord:
    return StackRecord(home=home, redis_url="redis://:pw@127.0.0.1:1/0",
                       database_url="sqlite:///x.db", redis_pid=123, signing_key="sk")  # fmt: skip


def test_a_saved_record_is_private_and_loads_as_it_was(tmp_path):
    path = record(tmp_path).save()
    assert path == tmp_path / RECORD and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_record(tmp_path) == record(tmp_path)
    assert load_record(tmp_path / "nowhere") is None


def test_an_unreadable_record_is_a_stack_error_naming_it(tmp_path):
    (tmp_path / RECORD).write_text('{"home": "x"}')
    with pytest.raises(StackError, match=RECORD):
        load_record(tmp_path)


def test_settings_win_over_the_record_and_without_either_it_says_what_to_do(tmp_path):
    settings = Settings(home=tmp_path)
    with pytest.raises(StackError, match="toolrun up"):
        redis_url_for(settings)
    assert redis_url_for(settings, required=False) is None
    with pytest.raises(StackError, match="TOOLRUN_SIGNING_KEY"):
        signing_key_for(settings)
    record(tmp_path).save()
    assert redis_url_for(settings) == record(tmp_path).redis_url
    assert signing_key_for(settings) == b"sk"
    own = Settings(home=tmp_path, redis_url="redis://elsewhere:1", signing_key=SecretStr("mine"))
    assert (redis_url_for(own), signing_key_for(own)) == ("redis://elsewhere:1", b"mine")
