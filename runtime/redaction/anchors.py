"""The literal strings a regular expression's every match must contain.

Redaction runs some forty detector patterns over every result; scanning a
32 KiB text with each of them costs tens of milliseconds, while finding a
literal with `str.find` costs a few dozen microseconds. So each pattern gets
anchors: a set of strings, one of which occurs in any match (lowercase, looked
for in the lowered text, when the pattern ignores case). A detector then runs
only on the lines where one of its anchors occurs (docs/architecture.md,
"Secrets"). A pattern without a usable anchor, or one that starts with a literal
(which the regex engine itself looks for as fast), runs on the whole text: an
anchor can only save work, never miss a match.
"""

from __future__ import annotations

import re
import re._constants as sre  # noqa: PLC2701 - the parser is the only way to read a compiled pattern
import re._parser as sre_parse
from dataclasses import dataclass
from functools import lru_cache

MIN_ANCHOR = 2  # a one-character anchor occurs on nearly every line: no anchor at all
MAX_ANCHORS = 24  # more alternatives than this cost more to look for than they save
FIND_AT_MOST = 4  # more anchors than this are looked for in one pass of a regex

Anchors = frozenset[str]


@dataclass(frozen=True)
class Anchor:
    """Strings one of which is in every match; `folded` when they are lowercase and
    to be looked for in the lowered text (the pattern ignores case somewhere)."""

    strings: Anchors
    folded: bool


def anchors(pattern: re.Pattern[str]) -> Anchor | None:
    """What every match of `pattern` contains; None when no set of strings of at
    least `MIN_ANCHOR` characters each is required."""
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    except re.error:
        return None
    folded = bool(pattern.flags & re.I) or "(?i" in pattern.pattern
    if not folded and _prefix(list(parsed)):
        return None  # the engine looks for a literal prefix itself, as fast as str.find
    found = _sequence(list(parsed))
    if not found or min(map(len, found)) < MIN_ANCHOR:
        return None
    if folded:
        return Anchor(frozenset(s.lower() for s in found), True)
    return Anchor(frozenset(found), False)


def prefix(pattern: re.Pattern[str]) -> str:
    """The literal characters every match of `pattern` starts with ("" if none,
    or if it ignores case)."""
    if pattern.flags & re.I or "(?i" in pattern.pattern:
        return ""
    try:
        return _prefix(list(sre_parse.parse(pattern.pattern, pattern.flags)))
    except re.error:
        return ""


def _prefix(items: list) -> str:
    """The literal characters every match starts with."""
    prefix = ""
    for op, value in items:
        if op is sre.LITERAL:
            prefix += chr(value)
        elif op is sre.SUBPATTERN and not value[1]:
            inner = _prefix(list(value[-1]))
            prefix += inner
            if len(inner) < len(value[-1]):
                return prefix
        else:
            return prefix
    return prefix


def _sequence(items: list) -> set[str] | None:
    """The best anchor set of a sequence: a run of exactly known parts (`gl`
    then one of `pat|dt` then `-`: {`glpat-`, `gldt-`}), or the best set a
    required part gives."""
    best: set[str] | None = None
    run: set[str] = {""}

    def consider(candidate: set[str] | None) -> None:
        nonlocal best
        if candidate and len(candidate) <= MAX_ANCHORS and _score(candidate) > _score(best):
            best = candidate

    for op, value in items:
        exact = _exact(op, value)
        if exact is not None and len(run) * len(exact) <= MAX_ANCHORS:
            run = {a + b for a in run for b in exact}
            continue
        consider(run)
        run = exact if exact is not None else {""}
        if exact is None:
            consider(_item(op, value))
            # `\d{8,10}:` ends with a digit: what follows a repeat starts from its last part
            if op in _REPEATS and value[0] >= 1 and len(value[2]) == 1:
                run = _exact(*value[2][0]) or {""}
    consider(run)
    return _shortest(best)


def _shortest(found: set[str] | None) -> set[str] | None:
    """Without the strings that contain another of the set (`"cl` when `cl` is there)."""
    if not found:
        return found
    return {s for s in found if not any(o != s and o in s for o in found)}


def _exact(op, value) -> set[str] | None:
    """The strings a part matches, when they are few and known."""
    if op is sre.LITERAL:
        return {chr(value)}
    if op is sre.IN and len(value) <= 4 and all(kind is sre.LITERAL for kind, _ in value):
        return {chr(code) for _, code in value}
    if op is sre.IN and value == [(sre.CATEGORY, sre.CATEGORY_DIGIT)]:
        return set("0123456789")  # `\d` taken as ASCII digits, as every token detector means it
    if op is sre.SUBPATTERN:
        return _exact_sequence(list(value[-1]))
    if op is sre.BRANCH:
        found = _either(value[1], _exact_sequence)
        return found if found and len(found) <= MAX_ANCHORS else None
    return None


def _exact_sequence(items: list) -> set[str] | None:
    run: set[str] = {""}
    for op, value in items:
        exact = _exact(op, value)
        if exact is None or len(run) * len(exact) > MAX_ANCHORS:
            return None
        run = {a + b for a in run for b in exact}
    return run


def _item(op, value) -> set[str] | None:
    if op is sre.SUBPATTERN:
        return _sequence(list(value[-1]))
    if op is sre.BRANCH:
        return _either(value[1], _sequence)
    if op in _REPEATS and value[0] >= 1:
        return _sequence(list(value[2]))
    return None


_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)


def _either(alternatives: list, each) -> set[str] | None:
    """The union of every alternative's strings; None if one has none."""
    found: set[str] = set()
    for alternative in alternatives:
        strings = each(list(alternative))
        if not strings:
            return None
        found |= strings
    return found


def _score(found: set[str] | None) -> int:
    return min(map(len, found)) if found else 0


def lines_with(lowered: str, found: Anchors) -> list[tuple[int, int]]:
    """The spans of the lines of `lowered` (or of the text itself, for anchors
    that are not folded) where an anchor occurs, from the newline before each
    (a pattern may start with it), merged where they touch."""
    spans: list[tuple[int, int]] = []
    if len(found) > FIND_AT_MOST:
        for match in _alternation(found).finditer(lowered):
            if spans and match.start() < spans[-1][1]:
                continue
            start = lowered.rfind("\n", 0, match.start())
            end = lowered.find("\n", match.end())
            spans.append((max(start, 0), len(lowered) if end == -1 else end + 1))
        return spans
    for anchor in found:
        at = lowered.find(anchor)
        while at != -1:
            start = lowered.rfind("\n", 0, at)
            end = lowered.find("\n", at + len(anchor))
            end = len(lowered) if end == -1 else end + 1
            spans.append((max(start, 0), end))
            at = lowered.find(anchor, end)
    if len(spans) < 2:
        return spans
    spans.sort()
    merged = [spans[0]]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


@lru_cache(maxsize=256)
def _alternation(found: Anchors) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, sorted(found, key=len, reverse=True))))
