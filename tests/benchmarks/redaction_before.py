"""The redactor before issue 14 (a hand list of 11 patterns), kept unchanged as
R1's baseline: `make bench` times it beside `runtime/redaction/redactor.py` on the same
result. Not used by toolrun itself."""

from __future__ import annotations

import functools
import re
from typing import Any

MARK = "[REDACTED:{}]"

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.S,
        ),
    ),
    ("anthropic_key", re.compile(r"sk-ant-[A-Za-z0-9_\-]{16,}")),
    ("openai_key", re.compile(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("bearer_token", re.compile(r"(?i)(?<=bearer )[A-Za-z0-9._~+/=\-]{8,}")),
    ("url_password", re.compile(r"(?<=://)([^/\s:@]+):[^/\s@]+(?=@)")),
    (
        "assigned_secret",
        re.compile(
            r"(?i)(?<![A-Za-z0-9])((?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token"
            r"|auth[_-]?token|client[_-]?secret)[\"']?\s*[:=]\s*[\"']?)([^\s\"',;&]{4,})"
        ),
    ),
]

SECRET_KEYS = re.compile(
    r"(?i)^(?:.*[_-])?(?:password|passwd|secret|api[_-]?key|token|access[_-]?key"
    r"|private[_-]?key|authorization|credentials?)$"
)


def redact_text(text: str) -> str:
    """`text` with every secret of the redaction set replaced by its marker."""
    if len(text) <= CACHED_CHARS:
        return _redact_short(text)
    return _redact(text)


CACHED_CHARS = 256  # short texts (modes, tool names, rules, statuses) repeat on every call


@functools.lru_cache(maxsize=4096)
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    for kind, pattern in PATTERNS:
        marker = MARK.format(kind)
        if kind == "url_password":
            text = pattern.sub(lambda m, mark=marker: f"{m.group(1)}:{mark}", text)
        elif kind == "assigned_secret":
            text = pattern.sub(lambda m, mark=marker: f"{m.group(1)}{mark}", text)
        else:
            text = pattern.sub(marker, text)
    return text


def redact(value: Any) -> Any:
    """A copy of JSON-shaped `value` with every secret replaced."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            key: (
                MARK.format("field")
                if isinstance(key, str)
                and SECRET_KEYS.match(key)
                and isinstance(item, str)
                and item
                else redact(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value
