"""Secrets found by the kind of file they are in (issue 40): a `.pgpass` line's
password, `.netrc` tokens, a bare-hex `master.key`; the same text under
another name is left as it is."""

from __future__ import annotations

import pytest

from runtime.redaction import redact_text

CASES = [
    (".pgpass", "db:5432:app:app_user:Hj4kLm9PqR2s\n", "Hj4kLm9PqR2s"),
    ("home/u/.netrc", "machine a\n  login b\n  password Vb7nQ2xLk9Rt\n", "Vb7nQ2xLk9Rt"),
    ("config/master.key", "3f8a9c2d7e1b4a6f0c5d8e2a9b7f1c4d\n", "3f8a9c2d7e1b4a6f0c5d8e2a9b7f1c4d"),
    ("config/credentials/production.key", "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b", "9e8d7c6b5a4f3e2d"),
]


@pytest.mark.parametrize(("name", "text", "secret"), CASES)
def test_a_secret_the_file_kind_holds_is_redacted(name, text, secret):
    out = redact_text(text, name)
    assert secret not in out and "[REDACTED:" in out, out


@pytest.mark.parametrize(("name", "text", "secret"), CASES)
def test_the_same_text_in_another_file_is_kept(name, text, secret):
    assert redact_text(text, "notes.txt") == text


def test_a_key_file_that_is_not_bare_hex_is_kept_whole():
    text = "3f8a9c2d7e1b4a6f0c5d8e2a9b7f1c4d is the md5 of the tarball\n"
    assert redact_text(text, "release.key") == text
