"""Rule specifiers against one segment: an allow rule's `*` never covers a flag
that escapes, and only a pattern that spells the flag out word for word does."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.gate.shell.commands import allowed_by, analyze
from runtime.gate.shell.patterns import covers, matches


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tmp_path


def allowed(command: str, ws: Path, pattern: str) -> bool:
    return allowed_by([pattern], analyze(command, ws))


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("git diff --ext-diff", "git diff --ext-diff"),
        ("git diff --ext-diff HEAD", "git diff --ext-diff *"),
        ("git -c core.pager=cat log", "git -c core.pager=cat log"),
        ("git diff --output /tmp/out", "git diff --output /tmp/out"),
    ],
)
def test_a_rule_that_spells_the_flag_out_covers_it(ws, command, pattern):
    assert allowed(command, ws, pattern)


@pytest.mark.parametrize(
    "pattern", ["git diff --ext-* *", "git -c * diff", "git diff --output *", "*", "git * HEAD"]
)
def test_a_glob_inside_a_pattern_never_covers_one(ws, pattern):
    segment = analyze("git -c x=y diff --ext-diff --output /tmp/o * HEAD", ws).segments[0]
    assert len(segment.escapes) == 4
    assert not covers(pattern, segment)


def test_deny_and_ask_rules_still_match_an_escaping_flag(ws):
    segment = analyze("git diff --output=/tmp/o HEAD", ws).segments[0]
    assert segment.escapes and matches("git diff *", segment)
    assert not covers("git diff *", segment)
