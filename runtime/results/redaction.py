"""Secrets out of everything that leaves a worker: results, ledger rows, logs,
task arguments as Flower shows them.

`redact` walks JSON-shaped data and replaces every secret with a marker that
names its kind, `[REDACTED:<kind>]`, so the model still knows something was
there. Secrets are found two ways (docs/architecture.md, "Secrets"):

- by their shape: detect-secrets' regex plugins, toolrun's own detectors and a
  deployment's `TOOLRUN_REDACTION_PATTERNS` (`runtime/results/detectors.py`); the kind
  is the detector's (`github_token`, `aws_access_key`, `url_password`, ...);
- by the name they are assigned to, in env, shell, INI, TOML, YAML, JSON,
  connection strings, headers and command-line flags (`runtime/results/secret_names.py`);
  the kind is the name (`AWS_SECRET_ACCESS_KEY=...` -> `aws_secret_access_key`).
  A mapping's value under a secret name is replaced whole.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from runtime.errors import ConfigurationError
from runtime.results import detectors, secret_names
from runtime.settings import get_settings

MARK = "[REDACTED:{}]"


def redact_text(text: str) -> str:
    """`text` with every secret replaced by its marker."""
    found = _detectors()
    if len(text) <= CACHED_CHARS:
        return _redact_short(text, found)
    return _redact(text, found)


CACHED_CHARS = 256  # short texts (modes, tool names, rules, statuses) repeat on every call


@functools.lru_cache(maxsize=4096)
def _redact_short(text: str, found: detectors.DetectorSet) -> str:
    return _redact(text, found)


def _redact(text: str, found: detectors.DetectorSet) -> str:
    # Detectors scan a one-byte copy (twice as fast to search): each non-ASCII
    # character reads `x` there, a token character, at the same position.
    scan = text if text.isascii() else _NON_ASCII.sub("x", text)
    lowered = scan.lower()
    names = secret_names.spans(text, lowered)
    spans = detectors.find(found, scan, lowered)
    spans += [(start, end, len(found.items), kind) for start, end, kind in names]
    if not spans:
        return text
    spans.sort(key=lambda span: (span[0], span[2], -span[1]))
    pieces, at = [], 0
    for start, end, _, kind in spans:
        if start < at:  # overlaps a secret already replaced: its marker covers this one too
            at = max(at, end)
            continue
        pieces += (text[at:start], MARK.format(kind))
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def redact(value: Any) -> Any:
    """A copy of JSON-shaped `value` with every secret replaced."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            key: (
                MARK.format(detectors.snake(key))
                if isinstance(key, str)
                and isinstance(item, str)
                and item
                and secret_names.is_secret_name(key)
                else redact(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def _detectors() -> detectors.DetectorSet:
    """The built-in detectors and the deployment's patterns from settings. Settings
    that fail to load leave the built-in set: startup reports them, and a log
    line on the way must still be redacted."""
    try:
        settings = get_settings()
    except ConfigurationError:
        return detectors.detectors()
    if _LAST[0] is not settings:
        _LAST[:] = [
            settings,
            detectors.detectors(tuple(sorted(settings.redaction_patterns.items()))),
        ]
    return _LAST[1]


_LAST: list[Any] = [None, None]  # the settings last seen and their detectors
