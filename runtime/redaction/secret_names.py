"""Values found by the names they are assigned to: `AWS_SECRET_ACCESS_KEY=...`,
`password = ...`, `"githubToken": "..."`, `AccountKey=...;`, `--token x`,
`Authorization: Basic ...`.

A name is secret when its last part is a secret noun, or its last two parts
are, or when a strong secret noun (`password`, `secret`, `token`, `api_key`...)
is followed by words that qualify the secret rather than describe something
about it: `SECRET_KEY_BASE`, `API_KEY_PROD`, `JWT_SIGNING` are secret,
`PASSWORD_MIN_LENGTH`, `token_count`, `secret_file` are not (`DESCRIBING`).
The nouns are detect-secrets' keyword denylist (`api_?key`, `db_?pass`,
`password`, ...) and toolrun's additions (token, credentials, authorization,
cookie, access key...). Parts split at `_`, `-`, `.` and camelCase, so
`AWS_SECRET_ACCESS_KEY`, `githubToken`, `client-secret` and `db_pass` are
secret, while `password_file`, `max_tokens`, `tokenizer` and `bypass` are not.

A value is left alone when it reads as code rather than data: a type
(`password: str`), a reference (`$DB_PASSWORD`, `settings.password`, a
snake_case variable, a call), a literal (None, true), a marker already, or a
word of prose that opens a clause (`... every pass: the tests ...`): `values.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from detect_secrets.plugins.keyword import DENYLIST

from runtime.redaction.detectors import snake
from runtime.redaction.values import is_data

# `api_?key` -> ("api", "key"); `password` -> ("password",)
_LIBRARY = [tuple(entry.split("_?")) for entry in DENYLIST]
_OWN = [
    ("token",),
    ("secret",),
    ("credential",),
    ("credentials",),
    ("passphrase",),
    ("pass",),
    ("pw",),
    ("authorization",),
    ("cookie",),
    ("access", "key"),
    ("secret", "key"),
    ("signing", "key"),
    ("encryption", "key"),
    ("master", "key"),
    ("session", "key"),
    ("app", "key"),
    ("shared", "key"),
    ("storage", "key"),
    ("iam", "key"),
    ("signing",),
]
NOUNS = {parts for parts in _LIBRARY + _OWN}
SINGLE = {parts[0] for parts in NOUNS if len(parts) == 1} | {"".join(p) for p in NOUNS}
PAIRS = {parts for parts in NOUNS if len(parts) == 2}

# Nouns that make a name secret wherever they stand in it (`API_KEY_PROD`), unless
# a word after them describes the secret rather than being one (`DESCRIBING`);
# weak ones (`pass`, `pw`, `cookie`, a bare `key`) count only at a name's end.
ANYWHERE = {
    parts
    for parts in NOUNS
    if len(parts) == 2 or parts[0] not in {"pass", "pw", "pwd", "cookie", "authorization"}
} | {("".join(parts),) for parts in NOUNS if len(parts) == 2}
DESCRIBING = set(
    """file files path paths dir dirs directory folder name names id ids type types kind
    length len count size min max minimum maximum limit limits ttl timeout expiry expires
    expire expiration expired lifetime age duration interval algorithm alg algo header
    headers field fields param params env var vars variable policy policies rotation
    rotate enabled enable disabled disable required require reset url urls uri endpoint
    host port prefix suffix format mode version provider providers source sources command
    cmd helper rounds pattern regex hint label prompt manager class store backend location
    hash hashed digest refresh issuer audience scope scopes budget usage used cache ref
    refs arn reader writer loader parser schema validator validation strength complexity
    changed set missing present exists error errors msg message check checker input
    output seen shown count counts tokens total per rate""".split()
)

# The whole rest of the line is the secret after these (`Authorization: Basic x`).
LINE_NOUNS = {"authorization", "cookie"}

# Where a secret noun ends a name and an assignment follows, looked for in the
# lowered text: one pattern a last word, each starting with a literal that the
# regex engine looks for as fast as str.find; the name is then read backwards in
# the original text (in the one-byte copy redaction.py scans, `ñ` reads `x`).
LAST_WORDS = [
    "key",
    "pass(?:word|wd|phrase)?",
    "pwd?",
    "secret",
    "token",
    "credentials?",
    "authorization",
    "cookie",
    "contrase(?:ña|na|xa)",
    "signing",
]
_OPERATOR = (
    r"(?P<close>\\?[\"'])?\]?[ \t]*"  # a JSON key's closing quote, a ["key"] bracket
    r"(?P<op>:=|=>|=(?![=>~])|:(?![:/])|>|,)[ \t]*"  # `<password>`, `define('X', ...)`
)
# A name may go on after its noun (`SECRET_KEY_BASE=`): `rest` is read with it.
ASSIGNMENTS = [
    re.compile(f"(?P<noun>{word})(?P<rest>[a-z0-9_.\\-]*){_OPERATOR}") for word in LAST_WORDS
]
assert all(any(re.fullmatch(f".*{w}", "".join(n)) for w in LAST_WORDS) for n in NOUNS)
FLAG = re.compile(r"--(?P<name>[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*)(?:=|[ \t]+)(?=[^\s-])")
VALUE = re.compile(r"(?P<q>\\?[\"'`])(?P<quoted>.*?)(?P=q)|(?P<bare>[^\s\"'`,;&<>()\[\]{}]+)")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z\u00f1]+|[0-9]+")
_REST_OF_LINE = re.compile(r"[^\r\n\"'`]*")
# What follows `name:` when the value is below it: a block scalar's indicator
# (`|`, `>-`, `|2+`) or nothing, each with an optional comment, to the line's end.
_BLOCK = re.compile(r"[|>][-+1-9]{0,2}[ \t]*(?:#[^\n]*)?\r?\n")
_ELEMENT = re.compile(r"(?P<value>[^<>\n]*[^<>\s])[ \t]*</(?P<name>[A-Za-z_][\w.:-]*)>")
_END_OF_LINE = re.compile(r"[ \t]*(?:#[^\n]*)?\r?\n")


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether `name` (a key, a variable, a header, a flag) names a secret."""
    parts = [part.lower() for part in _PARTS.findall(name)]
    if not parts:
        return False
    if parts[-1] in SINGLE or tuple(parts[-2:]) in PAIRS:
        return True
    for at in range(len(parts) - 1):
        for size in (2, 1):
            noun = tuple(parts[at : at + size])
            if noun in ANYWHERE and not DESCRIBING.intersection(parts[at + size :]):
                return True
    return False


def spans(text: str, lowered: str) -> Iterable[tuple[int, int, str]]:
    """(start, end, kind) of every value assigned to a secret name in `text`;
    `lowered` is `text` lowered, non-ASCII characters read as `x` (same length)."""
    if "=" not in lowered and ":" not in lowered and "--" not in lowered:
        if "</" not in lowered and "define(" not in lowered:
            return  # no assignment, no flag, no element, no constant
    for match in (m for pattern in ASSIGNMENTS for m in pattern.finditer(lowered)):
        noun_end = match.end("rest")
        start, limit = match.start("noun"), max(0, noun_end - 80)
        while start > limit and text[start - 1] in _NAME_CHARS:
            start -= 1
        name, op = text[start:noun_end], match.group("op")
        if op in (">", ",") and not _declared(text, start, op, match.group("close")):
            continue
        if not is_secret_name(name) or not _whole_key(text, start, match.group("close")):
            continue
        if op == ">":
            found = _element(text, match.end(), name)
        else:
            found = _value(text, match.end(), name, line=op != ",")
        if found is None and match.group("op") == ":":
            found = _below(text, start, match.end(), name)
        if found is not None:
            yield found
    for match in FLAG.finditer(text):
        before = text[match.start() - 1] if match.start() else " "
        if before.isalnum() or before in "-_":
            continue
        if is_secret_name(match.group("name")):
            found = _value(text, match.end(), match.group("name"), line=False)
            if found is not None:
                yield found


def _declared(text: str, start: int, op: str, close: str | None) -> bool:
    """Whether a name before `>` opens an XML element (`<password>` in Maven's
    settings.xml), or one before `,` is a PHP constant's (`define('DB_PASSWORD',`
    in wp-config.php)."""
    if op == ">":
        return start > 0 and text[start - 1] == "<"
    before = text[max(0, start - 12) : start - 1].rstrip(" \t")
    return close is not None and before.lower().endswith("define(")


def _element(text: str, at: int, name: str) -> tuple[int, int, str] | None:
    """The text of an element named `name` up to its closing tag."""
    found = _ELEMENT.match(text, at)
    if found is None or found["name"] != name or not is_data(found["value"], name, quoted=True):
        return None
    return *found.span("value"), snake(name.strip("-_."))


def _whole_key(text: str, start: int, close: str | None) -> bool:
    """A quoted key is the whole quoted string (`"client_secret":`, not the end
    of `"Basic Auth Credentials":`), and `${DB_PASSWORD:-x}` is a reference."""
    before = text[max(0, start - 2) : start]
    if before.endswith("$") or before == "${":
        return False
    return close is None or before.endswith(close[-1])


def _value(text: str, at: int, name: str, *, line: bool) -> tuple[int, int, str] | None:
    match = VALUE.match(text, at)
    if match is None:
        return None
    kind = name.strip("-_.")
    if match.group("quoted") is not None:
        start, end = match.span("quoted")
        if not is_data(match.group("quoted"), name, quoted=True):
            return None
        return start, end, snake(kind)
    start, end = match.span("bare")
    value = match.group("bare")
    if line and _PARTS.findall(name)[-1].lower() in LINE_NOUNS:
        end = _REST_OF_LINE.match(text, start).end()
        while end > start and text[end - 1] in " \t":
            end -= 1
    elif end < len(text) and text[end] in "([.":  # a call or an attribute
        return None
    if not is_data(value, name, quoted=False) or not is_data(text[start:end], name, quoted=True):
        return None
    return start, end, snake(kind)


def _below(text: str, start: int, at: int, name: str) -> tuple[int, int, str] | None:
    """A YAML value on the lines below its name (which begins its line): a block
    scalar (`password: |`, `>-`) or a plain one indented under it (`password:`,
    then the value). Every line deeper than the name is the value; a plain
    value must read as one datum (not `key: value`, a list, or code)."""
    line_start = text.rfind("\n", 0, start) + 1
    head = text[line_start:start]
    if head.strip(" \t-\"'"):
        return None  # `if not password:` is code: a YAML key begins its line
    block = _BLOCK.match(text, at)
    first = block.end() if block else _END_OF_LINE.match(text, at)
    if block is None and first is None:
        return None
    column = len(head.rstrip("\"'"))
    value_start = value_end = None
    position = first if isinstance(first, int) else first.end()
    while position < len(text):
        stop = text.find("\n", position)
        stop = len(text) if stop == -1 else stop
        line = text[position:stop]
        body = line.strip()
        if body:
            indent = len(line) - len(line.lstrip())
            if indent <= column:
                break
            if value_start is None:
                value_start = position + indent
                if block is None and not _is_plain_datum(body, name):
                    return None
            value_end = position + len(line.rstrip())
        elif value_start is None and block is None:
            return None  # `password:` and a blank line: a key with no value
        position = stop + 1
    if value_start is None:
        return None
    return value_start, value_end, snake(name.strip("-_."))


def _is_plain_datum(body: str, name: str) -> bool:
    token = VALUE.fullmatch(body)
    if token is None or body.endswith(":") or body.startswith("-"):
        return False
    if token.group("quoted") is not None:
        return is_data(token.group("quoted"), name, quoted=True)
    return is_data(body, name, quoted=False)
