"""A hook's answer, whatever its kind: a pre hook's decision, reason and
arguments, a post hook's note and mark; anything else is the hook failing."""

from __future__ import annotations

import pytest

from runtime.errors import HookFailed
from runtime.gate.decision import Effect
from runtime.gate.hooks.answer import TEXT_CHARS, Answer, parse


def test_nothing_is_no_opinion():
    assert parse(None, "pre") == Answer() == parse({}, "pre")


def test_a_pre_answer_decides_and_may_replace_the_arguments():
    answer = parse({"decision": "ask", "reason": " look ", "arguments": {"a": 1}}, "pre")
    assert (answer.effect, answer.reason, answer.arguments) == (Effect.ask, "look", {"a": 1})
    assert answer.as_dict() == {"decision": "ask", "reason": "look", "arguments_replaced": True}


def test_a_post_answer_notes_and_marks():
    answer = parse({"note": "n", "mark": "m"}, "post")
    assert (answer.note, answer.mark, answer.effect) == ("n", "m", None)


def test_a_long_reason_is_cut():
    answer = parse({"decision": "deny", "reason": "x" * (TEXT_CHARS + 10)}, "pre")
    assert answer.reason == "x" * TEXT_CHARS + "…"


@pytest.mark.parametrize(
    ("value", "when", "says"),
    [
        ([], "pre", "not a JSON object"),
        ({"decision": "maybe"}, "pre", "allow, deny or ask"),
        ({"arguments": [1]}, "pre", "arguments that are not a JSON object"),
        ({"note": "n"}, "pre", "unknown key(s) ['note']"),
        ({"decision": "deny"}, "post", "unknown key(s) ['decision']"),
        ({"reason": 3}, "pre", "reason that is not a string"),
    ],
)
def test_anything_else_is_the_hook_failing(value, when, says):
    with pytest.raises(HookFailed, match=r".*") as error:
        parse(value, when)
    assert says in str(error.value)
