"""Which rule "approve and remember" may add for a call (runtime/gate/remembering.py)."""

from __future__ import annotations

import pytest

from runtime.gate.remembering import BeyondRole, RememberRefused, rule_for
from runtime.tools.loading import load_tools


@pytest.fixture(scope="module")
def registry():
    return load_tools([])


def test_the_narrowest_rule_names_the_call_itself(registry, tmp_path):
    write = registry.get("write_file")
    arguments = {"path": "docs/a.md", "content": "x"}
    exact = f"write_file({(tmp_path / 'docs' / 'a.md').resolve()})"
    assert rule_for(write, arguments, tmp_path, may_widen=False) == exact
    assert rule_for(write, arguments, tmp_path, exact, may_widen=False) == exact
    assert rule_for(write, arguments, tmp_path, "write_file(docs/*.md)", may_widen=True) == (
        "write_file(docs/*.md)"
    )


@pytest.mark.parametrize(
    ("wanted", "may_widen", "error", "says"),
    [
        ("write_file(docs/*.md)", False, BeyondRole, "only an admin may"),
        ("write_file", False, BeyondRole, "only an admin may"),
        ("write_file(*.txt)", True, RememberRefused, "does not cover the call"),
        ("edit_file(docs/*.md)", True, RememberRefused, "not a rule for write_file"),
        ("*", True, RememberRefused, "not a rule for write_file"),
        ("write_file(", True, RememberRefused, "invalid allow rule"),
    ],
)
def test_a_rule_wider_than_the_role_or_beside_the_call_is_refused(
    registry, tmp_path, wanted, may_widen, error, says
):
    arguments = {"path": "docs/a.md", "content": "x"}
    with pytest.raises(error, match=says):
        rule_for(registry.get("write_file"), arguments, tmp_path, wanted, may_widen=may_widen)


def test_a_path_that_reads_as_a_pattern_has_no_narrowest_rule(registry, tmp_path):
    with pytest.raises(RememberRefused, match="no single rule"):
        rule_for(
            registry.get("write_file"), {"path": "a*.md", "content": "x"}, tmp_path, may_widen=False
        )
