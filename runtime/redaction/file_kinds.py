"""Secrets found by the kind of file they are in, where its name says its
format and nothing in the text does: a `.pgpass` line's last field, a `.netrc`
`password` token on any line, a Rails `master.key` (the file is the key), the
keys and salts of WordPress's `wp-config.php`.

A tool that knows the file it shows (read_file, search_files, the diff of
write_file and edit_file, a diff's `+++ b/<path>` header) names it; text from
elsewhere is redacted by shape and by name alone (docs/architecture.md,
"Secrets").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePosixPath

PGPASS = re.compile(r"(?m)^(?![ \t]*#)(?:(?:[^:\\\n]|\\.)*:){4}(?P<secret>[^\r\n]+)")
NETRC = re.compile(r"(?:^|\s)(?:password|account)[ \t\r\n]+(?P<secret>[^\s]+)")
BARE_KEY = re.compile(r"\s*(?P<secret>[0-9a-fA-F]{32,128})\s*")
# WordPress's keys and salts (`define('NONCE_SALT', '...')`); DB_PASSWORD and
# AUTH_KEY are secret by name anywhere (secret_names.py), these only here.
WP_SALT = re.compile(
    r"""(?i)\bdefine\(\s*(?P<q>["'])\w*_(?:key|salt)(?P=q)\s*,\s*"""
    r"""(?P<v>["'])(?P<secret>(?:\\.|(?!(?P=v)).)*)(?P=v)"""
)

Kind = str | None


def kind_of(name: str | None) -> Kind:
    """The kind of file `name` (a path) is, when its secrets need it; else None."""
    if not name:
        return None
    base = PurePosixPath(name.replace("\\", "/")).name.lower()
    if base in {".pgpass", "pgpass.conf"}:
        return "pgpass"
    if base in {".netrc", "_netrc"}:
        return "netrc"
    if base.endswith(".key"):
        return "bare_key"
    if base == "wp-config.php":
        return "wp_config"
    return None


def spans(text: str, lowered: str, kind: Kind) -> Iterable[tuple[int, int, str]]:
    """(start, end, kind) of each secret a file of `kind` holds in `text`."""
    if kind == "pgpass":
        yield from _groups(PGPASS.finditer(text), "pgpass_password")
    elif kind == "netrc":
        yield from _groups(NETRC.finditer(text), "netrc_password")
    elif kind == "bare_key":
        yield from _groups(filter(None, [BARE_KEY.fullmatch(text)]), "master_key")
    elif kind == "wp_config":
        yield from _groups(WP_SALT.finditer(text), "wordpress_key")


def _groups(matches: Iterable[re.Match[str]], kind: str) -> Iterable[tuple[int, int, str]]:
    for match in matches:
        start, end = match.span("secret")
        if end > start:
            yield start, end, kind
