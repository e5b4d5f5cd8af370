"""Budgets and the price table of a policy (docs/architecture.md, "Usage and budgets").

The org policy file declares them beside its rules:

    {"limits": {"budget": [
        {"name": "daily-calls", "per": "key", "window": "day", "calls": 1000},
        {"name": "spend", "per": "key", "window": "month", "money": 50, "keys": ["key:ci"]},
        {"name": "turn", "per": "batch", "worker_seconds": 600}]},
     "prices": {"http_get": {"per_call": 0.001}, "*": {"per_second": 0.0002}}}

A budget counts one measure (`calls`, `worker_seconds` or `money`) per
submitter (`key` and `principal` name the same thing: the gateway's key or the
`submitter` given to `submit`) and window (a UTC `day` or `month`), or per
batch. `keys` narrows it to some submitters. Money is priced by `prices`: per
call and per worker-second (the tool's wall time on the worker), by tool name,
`*` for every other tool. The user and project files may add budgets (every
budget applies, so adding one only tightens) but not prices.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Measure = Literal["calls", "worker_seconds", "money"]
MEASURES: tuple[Measure, ...] = ("calls", "worker_seconds", "money")
BATCH_TTL = 2 * 24 * 3600  # how long a batch's counters live: longer than any batch


class Budget(BaseModel):
    """One budget of a settings file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    per: Literal["key", "principal", "batch"]
    window: Literal["day", "month"] | None = None
    calls: int | None = Field(default=None, ge=0)
    worker_seconds: float | None = Field(default=None, ge=0)
    money: float | None = Field(default=None, ge=0)
    keys: tuple[str, ...] | None = None  # the submitters it applies to; None: each of them
    source: str = ""  # the file it came from (set when read)

    @model_validator(mode="after")
    def _one_measure(self) -> Budget:
        given = [m for m in MEASURES if getattr(self, m) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of calls, worker_seconds, money")
        if self.per == "batch" and self.window is not None:
            raise ValueError("a per-batch budget has no window: it lasts the batch")
        if self.per != "batch" and self.window is None:
            raise ValueError('a budget per key or principal needs a window: "day" or "month"')
        return self

    @property
    def measure(self) -> Measure:
        return next(m for m in MEASURES if getattr(self, m) is not None)

    @property
    def limit(self) -> float:
        return float(getattr(self, self.measure))

    def applies_to(self, principal: str | None) -> bool:
        return self.keys is None or principal in self.keys

    def scope(self, principal: str | None, batch_id: str) -> str:
        return batch_id if self.per == "batch" else principal or "anonymous"

    def window_of(self, now: datetime) -> tuple[str, datetime | None]:
        """The window `now` falls in (its name in keys) and when it resets."""
        now = now.astimezone(UTC)
        if self.window == "day":
            start = now.replace(hour=0, minute=0, second=0, microsecond=0)
            return start.strftime("%Y-%m-%d"), start + timedelta(days=1)
        if self.window == "month":
            start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
            following = (start + timedelta(days=32)).replace(day=1)
            return start.strftime("%Y-%m"), following
        return "batch", None

    def describe(self) -> str:
        who = "per batch" if self.per == "batch" else f"per {self.per}"
        window = f" per {self.window}" if self.window else ""
        limit = _amount(self.measure, self.limit)
        return f"{self.name!r} ({limit} {who}{window}, from {self.source})"


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    per_call: float = Field(default=0.0, ge=0)
    per_second: float = Field(default=0.0, ge=0)


class Counter(BaseModel):
    """One budget's counter for one call (`key` names it; `keyspace/names.py`
    spells its Redis key): the amount to add, the
    limit, how long the key lives, and whether being at the limit already
    refuses (`strict`) or only passing it does."""

    model_config = ConfigDict(frozen=True)

    key: str
    amount: float
    limit: float
    ttl: int
    strict: bool = True


class Overrun(BaseModel):
    """A budget the call would go past, as the model and the ledger are told it."""

    budget: Budget
    used: float
    resets_at: datetime | None

    def content(self, now: datetime) -> dict[str, Any]:
        b = self.budget
        left = max(0.0, b.limit - self.used)
        retry = None
        if self.resets_at is not None:
            retry = max(0, int((self.resets_at - now).total_seconds()))
        return {
            "budget": b.name,
            "source": b.source,
            "per": b.per,
            "window": b.window,
            "measure": b.measure,
            "limit": b.limit,
            "used": round(self.used, 6),
            "left": round(left, 6),
            "resets_at": self.resets_at.isoformat() if self.resets_at else None,
            "retry_after_s": retry,
        }

    def message(self, now: datetime) -> str:
        c = self.content(now)
        when = (
            f"It resets at {c['resets_at']} (in {c['retry_after_s']} s)."
            if c["resets_at"]
            else "It lasts the batch: submit further calls in a new batch, or stop."
        )
        return (
            f"over budget: budget {self.budget.describe()}: "
            f"{_amount(c['measure'], c['used'])} used, {_amount(c['measure'], c['left'])} left; "
            f"this call would pass it, so it was not run. {when}"
        )


class Spending:
    """A batch's budgets and prices, and the submitter they are counted for.
    Carried (signed) in the batch's policy snapshot, so the worker checks the
    budgets the batch was admitted under."""

    def __init__(
        self,
        budgets: tuple[Budget, ...] = (),
        prices: dict[str, Price] | None = None,
        principal: str | None = None,
    ) -> None:
        self.budgets, self.prices, self.principal = budgets, prices or {}, principal

    def __bool__(self) -> bool:
        return bool(self.budgets or self.prices)

    def snapshot(self) -> dict[str, Any]:
        return {
            "budgets": [b.model_dump(mode="json") for b in self.budgets],
            "prices": {tool: p.model_dump() for tool, p in self.prices.items()},
            "principal": self.principal,
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any] | None) -> Spending:
        if not data:
            return cls()
        budgets = tuple(Budget.model_validate(b) for b in data.get("budgets", ()))
        prices = {t: Price.model_validate(p) for t, p in data.get("prices", {}).items()}
        return cls(budgets, prices, data.get("principal"))

    def for_principal(self, principal: str | None) -> Spending:
        return Spending(self.budgets, self.prices, principal)

    def price(self, tool: str) -> Price | None:
        return self.prices.get(tool) or self.prices.get("*")

    def cost(self, tool: str, wall_seconds: float) -> float | None:
        price = self.price(tool)
        if price is None:
            return None
        return round(price.per_call + price.per_second * wall_seconds, 9)

    def applying(self) -> list[Budget]:
        return [b for b in self.budgets if b.applies_to(self.principal)]

    def counters(
        self, tool: str, batch_id: str, now: datetime, *, to_run: bool = False
    ) -> tuple[list[Budget], list[Counter]]:
        """The counters a call is checked against: at admission (`to_run`
        False) it reserves one call and its per-call price; right before the
        tool runs it reserves nothing and only refuses if time or money has
        run out since (its call was counted at admission)."""
        price = self.price(tool) or Price()
        budgets, counters = [], []
        for budget in self.applying():
            if to_run and budget.measure == "calls":
                continue
            amount = {"calls": 1.0, "money": price.per_call, "worker_seconds": 0.0}[budget.measure]
            counters.append(
                Counter(
                    key=self.key(budget, batch_id, now),
                    amount=0.0 if to_run else amount,
                    limit=budget.limit,
                    ttl=_ttl(budget, now),
                    strict=not to_run or budget.measure == "worker_seconds",
                )
            )
            budgets.append(budget)
        return budgets, counters

    def charges(
        self, tool: str, batch_id: str, now: datetime, wall_seconds: float
    ) -> list[Counter]:
        """What a call that ran adds once it has: its worker-seconds, and the
        money of them (its per-call price was reserved at admission)."""
        price = self.price(tool) or Price()
        out = []
        for budget in self.applying():
            amount = {
                "calls": 0.0,
                "worker_seconds": wall_seconds,
                "money": price.per_second * wall_seconds,
            }[budget.measure]
            if amount > 0:
                key, ttl = self.key(budget, batch_id, now), _ttl(budget, now)
                out.append(Counter(key=key, amount=amount, limit=budget.limit, ttl=ttl))
        return out

    def overrun(self, budget: Budget, used: float, now: datetime) -> Overrun:
        return Overrun(budget=budget, used=used, resets_at=budget.window_of(now)[1])

    def key(self, budget: Budget, batch_id: str, now: datetime) -> str:
        source = source_tag(budget.source)
        window, scope = budget.window_of(now)[0], budget.scope(self.principal, batch_id)
        return f"{source}:{budget.name}:{scope}:{window}"  # Redis's key: `names.budget_key`


def source_tag(source: str) -> str:
    """What names a budget's file in its counters' keys."""
    return hashlib.sha256(source.encode()).hexdigest()[:8]


def _ttl(budget: Budget, now: datetime) -> int:
    reset = budget.window_of(now)[1]
    if reset is None:
        return BATCH_TTL
    return int((reset - now.astimezone(UTC)).total_seconds()) + 3600  # an hour past its window


def _amount(measure: str, value: float) -> str:
    if measure == "calls":
        return f"{value:g} calls"
    if measure == "worker_seconds":
        return f"{value:g} worker-seconds"
    return f"{value:g} money"
