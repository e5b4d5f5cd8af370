"""Values named by a secret name in forms that are not assignments: an XML
element (`<password>...</password>` in Maven's `settings.xml`) and a PHP
constant (`define('DB_PASSWORD', '...')` in WordPress's `wp-config.php`).

The name decides, as for assignments (`runtime/redaction/secret_names.py`);
each form is looked for only when its trigger (`</`, `define(`) is in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from runtime.redaction.detectors import snake
from runtime.redaction.secret_names import is_data, is_secret_name

ELEMENT = re.compile(r"<(?P<name>[A-Za-z_][\w.:-]{0,80})>(?P<value>[^<>\n]{3,})</(?P=name)>")
DEFINE = re.compile(
    r"""(?i)\bdefine\(\s*(?P<q>["'])(?P<name>\w{1,80})(?P=q)\s*,\s*"""
    r"""(?P<v>["'])(?P<value>(?:\\.|(?!(?P=v)).){3,}?)(?P=v)\s*\)"""
)


def spans(text: str, lowered: str, *, salts: bool = False) -> Iterable[tuple[int, int, str]]:
    """(start, end, kind) of each value an element or a `define` names secret;
    `salts`: WordPress's keys and salts too (`NONCE_SALT`, `LOGGED_IN_KEY`), for a
    file known to be its configuration (`runtime/redaction/file_kinds.py`)."""
    if "</" in text:
        for match in ELEMENT.finditer(text):
            yield from _named(match, match.group("value").strip())
    if "define(" in lowered:
        for match in DEFINE.finditer(text):
            name = match.group("name")
            if salts and name.upper().endswith(("_KEY", "_SALT")):
                start, end = match.span("value")
                yield start, end, snake(name)
            else:
                yield from _named(match, match.group("value"))


def _named(match: re.Match[str], value: str) -> Iterable[tuple[int, int, str]]:
    name = match.group("name")
    if is_secret_name(name) and is_data(value, name, quoted=True):
        start = match.start("value") + match.group("value").index(value)
        yield start, start + len(value), snake(name)
