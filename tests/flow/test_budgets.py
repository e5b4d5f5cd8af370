"""A budget's windows and counters, and what an over-budget call tells the
model (reading them from a file: test_reading.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from runtime.flow.budget_reading import read_budgets, read_prices
from runtime.flow.budgets import Budget, Spending

NOW = datetime(2026, 12, 1, 5, 30, tzinfo=UTC)


def budgets(*entries: dict) -> tuple[Budget, ...]:
    return read_budgets({"limits": {"budget": list(entries)}}, "org.json")


def test_windows_reset_at_the_next_utc_day_or_month():
    day, month, batch = budgets(
        {"name": "d", "per": "key", "window": "day", "calls": 1},
        {"name": "m", "per": "principal", "window": "month", "money": 1},
        {"name": "b", "per": "batch", "worker_seconds": 1},
    )
    assert day.window_of(NOW) == ("2026-12-01", datetime(2026, 12, 2, tzinfo=UTC))
    assert month.window_of(NOW) == ("2026-12", datetime(2027, 1, 1, tzinfo=UTC))
    assert batch.window_of(NOW) == ("batch", None)


def test_counters_are_per_submitter_or_batch_and_keys_narrow_a_budget():
    spending = Spending(
        budgets(
            {"name": "d", "per": "key", "window": "day", "calls": 3},
            {"name": "b", "per": "batch", "money": 1.0},
            {"name": "ci", "per": "key", "window": "day", "calls": 1, "keys": ["key:ci"]},
        ),
        {"*": read_prices({"prices": {"*": {"per_call": 0.25}}}, "org.json")["*"]},
        principal="key:alice",
    )
    found, counters = spending.counters("echo", "batch1", NOW)
    assert [b.name for b in found] == ["d", "b"]  # `ci` is not alice's
    assert counters[0].key.endswith(":d:key:alice:2026-12-01")
    assert counters[1].key.endswith(":b:batch1:batch")
    assert [c.amount for c in counters] == [1.0, 0.25]  # a call, and its per-call price
    # Right before the tool runs: the call was counted; time or money spent since may refuse it.
    found, counters = spending.counters("echo", "batch1", NOW, to_run=True)
    assert [b.name for b in found] == ["b"] and counters[0].amount == 0


def test_an_over_budget_result_says_which_budget_what_is_left_and_when_it_resets():
    (budget,) = budgets({"name": "daily", "per": "key", "window": "day", "calls": 100})
    overrun = Spending((budget,)).overrun(budget, 100, NOW)
    message = overrun.message(NOW)
    assert "budget 'daily' (100 calls per key per day, from org.json)" in message
    assert "100 calls used, 0 calls left" in message
    assert "It resets at 2026-12-02T00:00:00+00:00 (in 66600 s)" in message
    content = overrun.content(NOW)
    assert content["retry_after_s"] == 66600 and content["left"] == 0
    assert content["source"] == "org.json" and content["measure"] == "calls"
