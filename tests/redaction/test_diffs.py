"""A unified diff redacted as the two texts it compares (issue 40): the
`-`/`+`/space prefixes do not hide a value's indentation, sides interleave,
and a header's path gives the file's kind."""

from __future__ import annotations

import difflib

from runtime.redaction import redact_text

OLD = "db:\n  user: app\n  password:\n    Zq8vN3xLp0Rt7YwK2mBs\n  pool: 10\n"
NEW = "db:\n  user: app2\n  password:\n    Hx4tR9wQm2Lk7VbN5pZs\n  pool: 10\n"


def diff(old: str, new: str, name: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}"
    )
    return "".join(lines)


def test_each_side_of_a_hunk_is_redacted_as_its_file_would_be():
    out = redact_text(diff(OLD, NEW, "config.yaml"))
    assert "Zq8vN3xLp0Rt7YwK2mBs" not in out and "Hx4tR9wQm2Lk7VbN5pZs" not in out
    assert "-    [REDACTED:password]\n+    [REDACTED:password]\n" in out
    assert "-  user: app\n+  user: app2\n" in out and "   pool: 10\n" in out


def test_a_header_s_path_gives_the_kind_of_each_file():
    text = diff("a:1:b:c:Hj4kLm9PqR2s\n", "a:1:b:c:Wq7zXc3VbN8m\n", ".pgpass")
    text += diff("x\n", "y\n", "notes.txt")
    out = redact_text(text)
    assert "Hj4kLm9PqR2s" not in out and "Wq7zXc3VbN8m" not in out
    assert "-x\n+y\n" in out


def test_a_secret_on_lines_the_other_side_interleaves_is_marked_on_each():
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAtGh7mZ2q\nHn3VbQ8yZ5mC1tL4\n"
    old = key.replace("-----BEGIN", "x\n-----BEGIN")
    new = key.replace("MIIEow", "MIIEoX") + "-----END RSA PRIVATE KEY-----\n"
    out = redact_text(diff(old, new, "id_rsa.txt"))
    assert "Hn3VbQ8yZ5mC1tL4" not in out and "tGh7mZ2q" not in out


def test_text_that_only_mentions_a_hunk_header_is_kept():
    text = "the header reads @@ -1,3 +1,3 @@ and then\n password:\n"
    assert redact_text(text) == text
