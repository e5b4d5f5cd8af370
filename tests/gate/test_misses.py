"""A decision the mode made says which allow rules were tried and why none
covered the call: the part of a compound command, the path or the host they
missed, and the reason a command cannot be covered at all."""

from __future__ import annotations

import pytest

from tests.gate.test_permissions import A, D, Q, decide, shell_decision


def test_a_compound_command_names_the_part_the_rule_matched_and_the_one_it_did_not(tmp_path):
    decision = shell_decision(
        tmp_path, "sleep 1; echo done", "default", ("allow", "shell(sleep *)")
    )
    assert (decision.effect, decision.rule) == (Q, "mode:default")
    assert "the allow rule shell(sleep *) matched `sleep 1` but not `echo done`" in decision.reason
    assert "every part" in decision.reason


def test_in_auto_mode_the_refusal_says_it_too(tmp_path):
    decision = shell_decision(tmp_path, "sleep 1 && echo done", "auto", ("allow", "shell(sleep *)"))
    assert decision.effect is D
    assert "matched `sleep 1` but not `echo done`" in decision.reason


def test_a_single_command_the_rule_does_not_match(tmp_path):
    decision = shell_decision(tmp_path, "make test", "default", ("allow", "shell(git *)"))
    assert "the allow rule shell(git *) does not match `make test`" in decision.reason


def test_several_rules_and_no_part_matched(tmp_path):
    rules = [("allow", "shell(git *)"), ("allow", "shell(ls)")]
    decision = shell_decision(tmp_path, "make && make install", "default", *rules)
    assert "the allow rules shell(git *), shell(ls) matched no part of the command" in (
        decision.reason
    )


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("sleep $(cat n)", "covers no command that cannot be read"),
        ("sleep 1 > ../out", "covers no command that redirects outside the workspace"),
    ],
)
def test_a_command_no_rule_can_cover_says_why(tmp_path, command, why):
    decision = shell_decision(tmp_path, command, "default", ("allow", "shell(sleep *)"))
    assert decision.effect is Q and why in decision.reason


def test_an_escaping_flag_is_named_once_and_not_as_a_miss(tmp_path):
    decision = shell_decision(
        tmp_path, "git diff --output=/tmp/x", "default", ("allow", "shell(git diff *)")
    )
    assert "'--output=/tmp/x'" in decision.reason and "does not match" not in decision.reason


def test_rules_of_other_tools_and_deny_rules_are_not_called_tried(tmp_path):
    rules = [("allow", "read_file(sleep *)"), ("deny", "shell(rm *)")]
    decision = shell_decision(tmp_path, "sleep 1; echo done", "default", *rules)
    assert decision.reason == "destructive tools need approval in default mode without a rule"


def test_a_path_rule_names_the_path_it_missed_and_how_stars_work(tmp_path):
    decision = decide(
        tmp_path, "wf", "default", [("user", "allow", "wf(docs/*)")], args={"path": "docs/a/b.md"}
    )
    assert (decision.effect, decision.rule) == (Q, "mode:default")
    assert "the allow rule wf(docs/*) does not match `docs/a/b.md`" in decision.reason
    assert "`**` crosses them" in decision.reason


def test_a_host_rule_names_the_host_it_missed(tmp_path):
    decision = decide(tmp_path, "net", "auto", [("user", "allow", "net(*.example.org)")])
    assert decision.effect is D
    assert "does not match the host of `https://api.example.com/v1`" in decision.reason


def test_a_rule_that_covers_is_no_miss(tmp_path):
    rules = [("user", "allow", "wf(docs/**)")]
    assert decide(tmp_path, "wf", "default", rules).effect is A
