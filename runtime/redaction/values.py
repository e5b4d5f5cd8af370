"""Whether a text after a secret name is a secret's value or reads as code, a
reference, a placeholder or prose (`runtime/redaction/secret_names.py` finds the
names; this says what follows them is data)."""

from __future__ import annotations

import re

from runtime.redaction.detectors import snake

CODE_WORDS = {
    "none",
    "null",
    "nil",
    "true",
    "false",
    "undefined",
    "str",
    "string",
    "int",
    "bool",
    "bytes",
    "float",
    "dict",
    "list",
    "any",
    "optional",
    "secretstr",
    "required",
    "self",
    "password",
    "secret",
    "token",
    "object",
    "number",
    "boolean",
    "void",
    "char",
}
# English words that open a clause ("... failing every pass: the tests' ..."):
# prose, not a value. A password that is one of them is no secret either.
PROSE_WORDS = {
    "the",
    "a",
    "an",
    "and",
    "or",
    "but",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "each",
    "every",
    "all",
    "one",
    "no",
    "not",
    "is",
    "was",
    "we",
    "you",
    "they",
    "then",
}
NOT_VALUES = CODE_WORDS | PROSE_WORDS

DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
SCHEME = re.compile(r"(?i)(?:bearer|basic|token|bot|digest)[ \t]+")
PLACEHOLDER = re.compile(r"(?i)change[-_ ]?me|your[-_ ]|x{4,}|\*{3,}|\.\.\.|<")
VERSION = re.compile(r"[~^<>=v]*\d+(?:\.[\dx*]+)+(?:[-+.][\w.]+)*")


def is_data(value: str, name: str, *, quoted: bool) -> bool:
    """Whether `value` reads as a secret's value rather than as code, a reference,
    a placeholder (`change-me`, `...`, `<token>`) or a version (`^0.7.1`)."""
    value = SCHEME.sub("", value, count=1)
    if len(value) < 3 or value.startswith(("$", "%(", "{{", "[REDACTED")):
        return False
    if not any(c.isalnum() for c in value) or PLACEHOLDER.match(value) or VERSION.fullmatch(value):
        return False
    if quoted:
        return True
    bare = value.strip(":")
    if bare.lower() in NOT_VALUES or snake(bare) == snake(name):
        return False
    return not DOTTED.fullmatch(bare)
