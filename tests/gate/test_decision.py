"""Decisions are values that say who decided."""

from __future__ import annotations

from runtime.gate.decision import Decision, Effect


def test_each_constructor_makes_its_effect_and_keeps_rule_and_source():
    for make, effect in (
        (Decision.allow, Effect.allow),
        (Decision.ask, Effect.ask),
        (Decision.deny, Effect.deny),
    ):
        decision = make("why", rule="write_file(*.md)", source="user.json")
        assert (decision.effect, decision.reason, decision.rule, decision.source) == (
            effect,
            "why",
            "write_file(*.md)",
            "user.json",
        )
    assert Decision.allow("why", rule="r").source == "runtime"


def test_as_dict_is_plain_strings_for_the_ledger_and_the_task_message():
    decision = Decision.deny("no", rule="mode:auto", source="mode")
    assert decision.as_dict() == {
        "effect": "deny",
        "reason": "no",
        "rule": "mode:auto",
        "source": "mode",
    }
