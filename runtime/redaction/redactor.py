"""Secrets out of everything that leaves a worker: results, ledger rows, logs,
task arguments as Flower shows them.

`redact` walks JSON-shaped data and replaces every secret with a marker that
names its kind, `[REDACTED:<kind>]`, so the model still knows something was
there. Secrets are found these ways (docs/architecture.md, "Secrets"):

- by their shape: detect-secrets' regex plugins, toolrun's own detectors and a
  deployment's `TOOLRUN_REDACTION_PATTERNS` (`runtime/redaction/detectors.py`); the kind
  is the detector's (`github_token`, `aws_access_key`, `url_password`, ...);
- by the name they are assigned to, in env, shell, INI, TOML, YAML, JSON,
  connection strings, headers, command-line flags, XML elements and PHP
  constants (`runtime/redaction/secret_names.py`); the kind
  is the name (`AWS_SECRET_ACCESS_KEY=...` -> `aws_secret_access_key`). A
  mapping's value under a secret name is replaced whole;
- by the kind of file they are in, when the caller names the file
  (`runtime/redaction/file_kinds.py`: `.pgpass`, `.netrc`, `master.key`);
- in a unified diff, as each of the two texts it compares would be
  (`runtime/redaction/diffs.py`).

A deployment's patterns come with the `Settings` a runtime, worker or gateway
is built from, as a `Redactor` handed to what writes (the formatter, the
ledger, the log handlers); nothing here reads the process's settings.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from runtime.redaction import detectors, diffs, file_kinds, secret_names

MARK = "[REDACTED:{}]"
CACHED_CHARS = 256  # short texts (modes, tool names, rules, statuses) repeat on every call


class Redactor:
    """The built-in detectors and a deployment's own patterns
    (`Settings.redaction_patterns`): what one runtime, worker or gateway redacts
    with. It is given, never looked up: two runtimes in one process, built
    from different settings, each redact by their own (`redactor_for`)."""

    def __init__(self, patterns: Mapping[str, str] | None = None) -> None:
        """`patterns`: `{"kind": "regex"}`; an invalid one is a ValueError naming it."""
        self.patterns = detectors.compile_patterns(patterns or {})

    @functools.cached_property
    def found(self) -> detectors.DetectorSet:
        """Built on first use: the library's detectors take a while to build."""
        return detectors.detectors(self.patterns)

    def redact_text(self, text: str, name: str | None = None) -> str:
        """`text` with every secret replaced by its marker; `name`: the path of
        the file `text` is (part of), when known (`file_kinds`)."""
        kind = file_kinds.kind_of(name)
        if len(text) <= CACHED_CHARS:
            return _redact_short(text, self.found, kind)
        return _redact(text, self.found, kind)

    def secrets(self, text: str, name: str | None = None) -> list[tuple[int, int, str]]:
        """Where `redact_text` puts its markers: (start, end, kind) of each
        secret, in order (edit_file matches only outside them)."""
        return _secrets(text, self.found, file_kinds.kind_of(name))

    def redact(self, value: Any) -> Any:
        """A copy of JSON-shaped `value` with every secret replaced."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return {
                key: (
                    MARK.format(detectors.snake(key))
                    if isinstance(key, str)
                    and isinstance(item, str)
                    and item
                    and secret_names.is_secret_name(key)
                    else self.redact(item)
                )
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.redact(item) for item in value]
        return value

    def __repr__(self) -> str:
        return f"Redactor({dict(self.patterns)!r})"


def redactor_for(patterns: Mapping[str, str]) -> Redactor:
    """The redactor of a set of patterns (a `Settings.redaction_patterns`),
    built once: its detectors and its cache of short texts are shared."""
    return _redactor(detectors.compile_patterns(patterns))


@functools.lru_cache(maxsize=16)
def _redactor(patterns: tuple[tuple[str, str], ...]) -> Redactor:
    return Redactor(dict(patterns))


BUILT_IN = Redactor()  # the built-in detectors only: for text no deployment's settings reach


def redact_text(text: str, name: str | None = None) -> str:
    """`text` (the file `name`, when known) redacted by the built-in detectors
    (`BUILT_IN`); what a runtime, worker or gateway writes goes through its own
    `Redactor` instead."""
    return BUILT_IN.redact_text(text, name)


def redact(value: Any) -> Any:
    """`value` redacted by the built-in detectors (`BUILT_IN`)."""
    return BUILT_IN.redact(value)


@functools.lru_cache(maxsize=4096)
def _redact_short(text: str, found: detectors.DetectorSet, kind: file_kinds.Kind) -> str:
    return _redact(text, found, kind)


def _redact(text: str, found: detectors.DetectorSet, kind: file_kinds.Kind = None) -> str:
    merged = _secrets(text, found, kind)
    if not merged:
        return text
    pieces, at = [], 0
    for start, end, kind in merged:
        pieces += (text[at:start], _marked(text[start:end], kind))
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def _secrets(
    text: str, found: detectors.DetectorSet, file_kind: file_kinds.Kind = None
) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each secret in `text` (a file of `kind`), in order;
    overlapping finds are one secret, of the first detector's kind."""
    # Detectors scan a one-byte copy (twice as fast to search): each non-ASCII
    # character reads `x` there, a token character, at the same position.
    scan = text if text.isascii() else _NON_ASCII.sub("x", text)
    lowered = scan.lower()
    names = list(secret_names.spans(text, lowered))
    if file_kind is not None:
        names += file_kinds.spans(text, lowered, file_kind)
    if diffs.HUNK in text:
        names += diffs.spans(
            text, lambda side, name: _secrets(side, found, file_kinds.kind_of(name))
        )
    spans = detectors.find(found, scan, lowered)
    spans += [(start, end, len(found.items), kind) for start, end, kind in names]
    if not spans:
        return []
    spans.sort(key=lambda span: (span[0], span[2], -span[1]))
    merged: list[tuple[int, int, str]] = []
    for start, end, _, kind in spans:
        if merged and start < merged[-1][1]:  # overlaps a secret already found: one marker
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end, merged[-1][2])
            continue
        merged.append((start, end, kind))
    return merged


def _marked(secret: str, kind: str) -> str:
    """The marker of `secret`: one on each of its lines, so a text keeps its line
    numbers and a window of lines shows a marker for every line of a secret it
    includes (docs/architecture.md, "Secrets")."""
    marker = MARK.format(kind)
    if "\n" not in secret:
        return marker
    lines = []
    for line in secret.split("\n"):
        body = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        lines.append(indent + marker + line[len(line.rstrip()) :] if body else line)
    return "\n".join(lines)


_NON_ASCII = re.compile(r"[^\x00-\x7f]")
