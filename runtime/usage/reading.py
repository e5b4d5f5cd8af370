"""The budgets and prices of a settings file, read and checked: a bad entry is
a `ConfigurationError` naming the file and the entry (docs/architecture.md,
"Usage and budgets"); `runtime/gate/policy.py` reads them with the rules."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from runtime.errors import ConfigurationError
from runtime.usage.budgets import Budget, Price


def read_budgets(data: dict[str, Any], source: str) -> tuple[Budget, ...]:
    """The `limits.budget` entries of a settings file, each checked; a bad one is
    a `ConfigurationError` naming the file and the entry."""
    limits = data.get("limits")
    entries = limits.get("budget", []) if isinstance(limits, dict) else []
    if not isinstance(entries, list):
        raise ConfigurationError(f"{source}: limits.budget must be a list of budgets")
    budgets, names = [], set()
    for index, entry in enumerate(entries):
        where = f"{source}: limits.budget[{index}]"
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            where += f" ({entry['name']})"
        if not isinstance(entry, dict) or "source" in entry:
            raise ConfigurationError(
                f"{where}: a budget is an object of name, per, window, "
                "and one of calls, worker_seconds, money"
            )
        try:
            budget = Budget.model_validate({**entry, "source": source})
        except ValidationError as error:
            raise ConfigurationError(f"{where}: {_problems(error)}") from None
        if budget.name in names:
            raise ConfigurationError(f"{where}: another budget of this file has its name")
        names.add(budget.name)
        budgets.append(budget)
    return tuple(budgets)


def read_prices(data: dict[str, Any], source: str) -> dict[str, Price]:
    """The `prices` section (org file only): tool name (or `*`) -> price."""
    entries = data.get("prices", {})
    if not isinstance(entries, dict):
        raise ConfigurationError(f"{source}: prices must be an object of tool name -> price")
    prices = {}
    for tool, entry in entries.items():
        try:
            prices[tool] = Price.model_validate(entry)
        except ValidationError as error:
            raise ConfigurationError(f"{source}: prices.{tool}: {_problems(error)}") from None
    return prices


def _problems(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}"
        for e in error.errors(include_url=False)
    )
