"""Rule specifiers for `shell` (`git diff *`) matched against one segment of a
command: `matches` for deny and ask rules, `covers` for allow rules, where a `*`
never covers a flag that escapes (`runtime.gate.shell.flags`)."""

from __future__ import annotations

import re
from functools import lru_cache

from runtime.gate.shell.analysis import Segment

SEP = "\x00"  # joins words for matching; a NUL byte cannot reach a shell
MARK = "\x01"  # wraps a flag that escapes globs; a control character makes a command opaque


def matches(pattern: str, segment: Segment) -> bool:
    """Does a rule specifier like `git diff *` match this one segment?

    `*` is the only wildcard and matches any text, spaces included; a trailing
    ` *` (or Claude Code's legacy `:*`) also matches nothing, so `git diff *`
    matches `git diff` but not `git diffx`. Spaces in the pattern are word
    boundaries: `git diff *` does not match the one word `"git diff"`.
    """
    regex = _pattern_regex(pattern)
    return regex is not None and regex.fullmatch(SEP.join(segment.words)) is not None


def covers(pattern: str, segment: Segment) -> bool:
    """Does an allow rule's specifier cover this segment? As `matches`, except
    that a `*` never matches a flag that escapes (`runtime.gate.shell.flags`):
    only a pattern that spells such a flag out, word for word, covers it."""
    if not segment.escapes:
        return matches(pattern, segment)
    if any(not escape.indices for escape in segment.escapes):
        return False
    marked = {index for escape in segment.escapes for index in escape.indices}
    words = [MARK + w + MARK if i in marked else w for i, w in enumerate(segment.words)]
    spelt = frozenset(segment.words[index] for index in marked)
    regex = _pattern_regex(pattern, spelt)
    return regex is not None and regex.fullmatch(SEP.join(words)) is not None


@lru_cache(maxsize=512)
def _pattern_regex(pattern: str, marked: frozenset[str] = frozenset()) -> re.Pattern[str] | None:
    """The regex of a rule's specifier. With `marked` (the escaping flags of the
    segment, which `covers` wraps in MARK), `*` never crosses a MARK, and a
    token spelt exactly as a marked word matches it wrapped."""
    pattern = pattern.strip()
    if pattern.endswith(":*"):
        pattern = pattern[:-2] + " *"
    tokens = pattern.split()
    if not tokens:
        return None
    star = f"[^{MARK}]*" if marked else ".*"

    def token_regex(token: str) -> str:
        if token in marked and "*" not in token:
            return re.escape(MARK + token + MARK)
        return star.join(re.escape(piece) for piece in token.split("*"))

    parts = [token_regex(tokens[0])]
    for index, token in enumerate(tokens[1:], start=1):
        if token == "*" and index == len(tokens) - 1:
            parts.append(f"(?:{SEP}{star})?")
        else:
            parts.append(SEP + token_regex(token))
    return re.compile("".join(parts), re.S)
