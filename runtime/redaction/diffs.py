"""A unified diff redacted as the two texts it compares would be.

A diff's lines carry a `-`, `+` or space in front, which defeats what reads a
line's shape (a YAML value below its name is found by its indentation), and
its two sides are interleaved. So each hunk's old text (context and `-` lines)
and new text (context and `+` lines) are rebuilt, redacted as a file of the
path the `+++`/`---` header names, and each secret found on a side is marked
on the diff lines it came from (docs/architecture.md, "Secrets").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

HUNK = "@@ -"  # a text without it has no hunk to read

_HEADER = re.compile(r"@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")
_PATH = re.compile(r"(?:\+\+\+|---) (?:[ab]/)?(?P<path>[^\t\r\n]+)")

Secrets = Callable[[str, "str | None"], list[tuple[int, int, str]]]
Line = tuple[int, str]  # where a side's line starts in the diff (after its prefix), its text


def spans(text: str, secrets: Secrets) -> Iterable[tuple[int, int, str]]:
    """(start, end, kind) in `text` of every secret `secrets(side, path)` finds
    in a side of one of its hunks."""
    for path, old, new in _hunks(text):
        for side in (old, new):
            if side:
                yield from _placed(side, secrets("\n".join(t for _, t in side) + "\n", path))


def _hunks(text: str) -> Iterable[tuple[str | None, list[Line], list[Line]]]:
    path: str | None = None
    old: list[Line] = []
    new: list[Line] = []
    left = right = 0  # lines the current hunk still holds on each side
    at = 0
    for line in text.splitlines(keepends=True):
        body, start = line.rstrip("\r\n"), at
        at += len(line)
        if left > 0 or right > 0:
            mark, rest = body[:1], body[1:]
            if mark in (" ", ""):
                old.append((start + 1, rest))
                new.append((start + 1, rest))
                left, right = left - 1, right - 1
                continue
            if mark == "-":
                old.append((start + 1, rest))
                left -= 1
                continue
            if mark == "+":
                new.append((start + 1, rest))
                right -= 1
                continue
            if mark == "\\":  # "\ No newline at end of file"
                continue
        header = _HEADER.match(body)
        if header is not None:
            if old or new:
                yield path, old, new
            old, new = [], []
            left, right = int(header["old"] or 1), int(header["new"] or 1)
            continue
        named = _PATH.match(body)
        if named is not None and named["path"] != "/dev/null":
            if old or new:
                yield path, old, new
            old, new, path = [], [], named["path"]
        left = right = 0
    if old or new:
        yield path, old, new


def _placed(side: list[Line], found: list[tuple[int, int, str]]) -> Iterable[tuple[int, int, str]]:
    """Each secret of a side's text, cut at its lines and moved to the diff."""
    offsets, at = [], 0
    for _, body in side:
        offsets.append(at)
        at += len(body) + 1
    for start, end, kind in found:
        for (where, body), offset in zip(side, offsets, strict=True):
            low, high = max(start, offset), min(end, offset + len(body))
            if low < high:
                yield where + low - offset, where + high - offset, kind
