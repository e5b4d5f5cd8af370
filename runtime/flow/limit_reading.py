"""The `limits` section of one settings file, read and checked, and the
files' limits merged (docs/architecture.md, "Flow control"): a bad entry is
a `ConfigurationError` naming the file and the entry."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from runtime.errors import ConfigurationError
from runtime.flow.budget_reading import named_entries, problems
from runtime.flow.limits import Concurrency, FairShare, Limits, Rate, Size, _Entry

SECTIONS = {"budget", "rate", "concurrency", "size", "fair_share"}


def read(data: dict[str, Any], source: str, *, org: bool) -> Limits:
    """The `limits` section of one settings file, checked: a bad entry is a
    `ConfigurationError` naming the file and the entry (its budgets are read
    by `runtime/flow/budget_reading.py`)."""
    section = data.get("limits", {})
    if not isinstance(section, dict):
        raise ConfigurationError(f"{source}: limits must be an object")
    unknown = sorted(set(section) - SECTIONS)
    if unknown:
        raise ConfigurationError(f"{source}: unknown key(s) {unknown} in limits")
    if "fair_share" in section and not org:
        raise ConfigurationError(f"{source}: limits.fair_share is the org policy's to set")
    rates = _entries(section, "rate", Rate, source)
    caps = _entries(section, "concurrency", Concurrency, source)
    size = _one(section, "size", Size, source)
    fair = _one(section, "fair_share", FairShare, source)
    return Limits(rates=rates, caps=caps, size=size, fair_share=fair)


def merged(org: Limits, *others: Limits) -> Limits:
    """The org's limits tightened by the others': every rate and cap applies;
    a size is the smallest any file gives."""
    size = org.size
    for other in (o.size for o in others if o.size is not None):
        size = size or Size()
        size = Size(
            calls_per_batch=min(size.calls_per_batch, other.calls_per_batch),
            open_batches_per_key=_least(size.open_batches_per_key, other.open_batches_per_key),
            waits_per_key=_least(size.waits_per_key, other.waits_per_key),
        )
    rates = org.rates + tuple(r for o in others for r in o.rates)
    caps = org.caps + tuple(c for o in others for c in o.caps)
    return Limits(rates=rates, caps=caps, size=size, fair_share=org.fair_share)


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _entries(section: dict[str, Any], key: str, model: type[_Entry], source: str) -> tuple:
    shape = "an entry is an object with a name and a per"
    return named_entries(section.get(key, []), key, model, source, shape=shape)


def _one(section: dict[str, Any], key: str, model: type[BaseModel], source: str) -> Any:
    if key not in section:
        return None
    try:
        return model.model_validate(section[key])
    except ValidationError as error:
        raise ConfigurationError(f"{source}: limits.{key}: {problems(error)}") from None
