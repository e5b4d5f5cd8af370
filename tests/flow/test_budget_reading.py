"""Budgets and prices as a settings file declares them: read and checked at
startup with an error naming the file and the entry; every level may add a
budget, only the org file prices."""

from __future__ import annotations

import json

import pytest

from runtime.errors import ConfigurationError
from runtime.flow.budget_reading import read_budgets, read_prices
from runtime.flow.budgets import Budget, Spending
from runtime.gate.policy import PolicySources
from runtime.settings import Settings


def budgets(*entries: dict) -> tuple[Budget, ...]:
    return read_budgets({"limits": {"budget": list(entries)}}, "org.json")


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"name": "a", "per": "key", "window": "day"}, "exactly one of calls"),
        ({"name": "a", "per": "key", "window": "day", "calls": 1, "money": 2}, "exactly one"),
        ({"name": "a", "per": "key", "calls": 1}, "needs a window"),
        ({"name": "a", "per": "batch", "window": "day", "calls": 1}, "has no window"),
        ({"name": "a", "per": "team", "window": "day", "calls": 1}, "per"),
        ({"name": "a", "per": "key", "window": "week", "calls": 1}, "window"),
        ({"name": "a", "per": "key", "window": "day", "calls": -1}, "calls"),
        ({"name": "a", "per": "key", "window": "day", "calls": 1, "cap": 3}, "cap"),
        ({"name": "a b", "per": "key", "window": "day", "calls": 1}, "name"),
        ("calls: 5", "is an object"),
    ],
)
def test_a_bad_budget_is_an_error_naming_the_file_and_the_entry(entry, says):
    with pytest.raises(ConfigurationError) as caught:
        budgets({"name": "fine", "per": "batch", "calls": 9}, entry)
    text = str(caught.value)
    assert text.startswith("org.json: limits.budget[1]"), text
    assert says in text, text


def test_two_budgets_of_one_file_may_not_share_a_name():
    with pytest.raises(
        ConfigurationError, match=r"budget\[1\] \(a\): another entry of limits.budget has its name"
    ):
        budgets(
            {"name": "a", "per": "batch", "calls": 1}, {"name": "a", "per": "batch", "calls": 2}
        )


def test_a_bad_price_names_its_tool():
    with pytest.raises(ConfigurationError, match=r"org.json: prices.http_get: per_call"):
        read_prices({"prices": {"http_get": {"per_call": -1}}}, "org.json")
    with pytest.raises(ConfigurationError, match=r"prices.echo: per_hour"):
        read_prices({"prices": {"echo": {"per_hour": 1}}}, "org.json")


def test_the_policy_is_checked_at_startup_and_only_the_org_file_prices(tmp_path):
    org, user = tmp_path / "org.json", tmp_path / "user.json"
    org.write_text(json.dumps({"limits": {"budget": [{"name": "x", "per": "key"}]}}))
    user.write_text("{}")
    with pytest.raises(ConfigurationError, match=r"org.json: limits.budget\[0\] \(x\)"):
        PolicySources(Settings(policy_file=org, user_settings_file=user))
    org.write_text("{}")
    user.write_text(json.dumps({"prices": {"*": {"per_call": 0}}}))
    with pytest.raises(ConfigurationError, match="unknown key"):
        PolicySources(Settings(policy_file=org, user_settings_file=user))


def test_every_level_may_add_a_budget_and_each_one_applies(tmp_path):
    """Adding a budget only tightens: the user's and the project's count beside the org's."""
    org, user = tmp_path / "org.json", tmp_path / "user.json"
    workspace = tmp_path / "ws"
    (workspace / ".toolrun").mkdir(parents=True)
    org.write_text(
        json.dumps(
            {
                "limits": {"budget": [{"name": "org", "per": "key", "window": "day", "calls": 9}]},
                "prices": {"echo": {"per_call": 0.5}},
            }
        )
    )
    user.write_text(
        json.dumps({"limits": {"budget": [{"name": "mine", "per": "batch", "calls": 2}]}})
    )
    (workspace / ".toolrun" / "settings.json").write_text(
        json.dumps({"limits": {"budget": [{"name": "repo", "per": "batch", "money": 1}]}})
    )
    policy = PolicySources(Settings(policy_file=org, user_settings_file=user)).policy_for(workspace)
    spending = Spending.from_snapshot(policy.counted_for("key:ci").snapshot()["usage"])
    assert [(b.name, b.source) for b in spending.budgets] == [
        ("org", str(org)),
        ("repo", str(workspace / ".toolrun" / "settings.json")),
        ("mine", str(user)),
    ]
    assert spending.principal == "key:ci"
    assert spending.price("echo").per_call == 0.5 and spending.price("nap") is None
