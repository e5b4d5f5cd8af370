"""The budgets and prices of a settings file, read and checked: a bad entry is
a `ConfigurationError` naming the file and the entry (docs/architecture.md,
"Usage and budgets"); `runtime/gate/policy.py` reads them with the rules."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from runtime.errors import ConfigurationError
from runtime.flow.budgets import Budget, Price

Named = TypeVar("Named", bound=BaseModel)  # an entry with a `name`


def read_budgets(data: dict[str, Any], source: str) -> tuple[Budget, ...]:
    """The `limits.budget` entries of a settings file, each checked; a bad one is
    a `ConfigurationError` naming the file and the entry."""
    limits = data.get("limits")
    entries = limits.get("budget", []) if isinstance(limits, dict) else []
    shape = "a budget is an object of name, per, window, and one of calls, worker_seconds, money"
    return named_entries(entries, "budget", Budget, source, shape=shape)


def named_entries(
    entries: Any, key: str, model: type[Named], source: str, *, shape: str
) -> tuple[Named, ...]:
    """`limits.<key>` of a settings file: a list of objects, each a `model`
    (given its `source`), named apart; else a `ConfigurationError` naming the
    file and the entry (`shape`: what an entry is, said when one is not an
    object). The budgets here and the rates and caps
    (`runtime/flow/limit_reading.py`) are read with it."""
    if not isinstance(entries, list):
        raise ConfigurationError(f"{source}: limits.{key} must be a list")
    found: list[Named] = []
    names: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"{source}: limits.{key}[{index}]"
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            where += f" ({entry['name']})"
        if not isinstance(entry, dict) or "source" in entry:
            raise ConfigurationError(f"{where}: {shape}")
        try:
            found.append(model.model_validate({**entry, "source": source}))
        except ValidationError as error:
            raise ConfigurationError(f"{where}: {problems(error)}") from None
        if found[-1].name in names:
            raise ConfigurationError(f"{where}: another entry of limits.{key} has its name")
        names.add(found[-1].name)
    return tuple(found)


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
            raise ConfigurationError(f"{source}: prices.{tool}: {problems(error)}") from None
    return prices


def problems(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}"
        for e in error.errors(include_url=False)
    )
