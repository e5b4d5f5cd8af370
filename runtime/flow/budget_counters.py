"""Budget counters in Redis, checked and added to in one step
(docs/architecture.md, "Usage and budgets"): a Lua script reads every counter
a call is held to and adds to them only if none would pass its limit, so two
submitters or workers racing for the last unit cannot both have it."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from runtime.flow.budgets import Counter
from runtime.keyspace.names import budget_key

# KEYS: the counters; ARGV: per counter amount, limit, ttl, strict (1/0).
# Returns {0, ""} when every counter took its amount, else {i, used} of the
# first (1-based) that would pass its limit, and nothing was added.
SPEND = """
for i = 1, #KEYS do
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  local amount, limit = tonumber(ARGV[4*i-3]), tonumber(ARGV[4*i-2])
  if used + amount > limit or (amount == 0 and ARGV[4*i] == '1' and used >= limit) then
    return {i, tostring(used)}
  end
end
for i = 1, #KEYS do
  if tonumber(ARGV[4*i-3]) ~= 0 then redis.call('INCRBYFLOAT', KEYS[i], ARGV[4*i-3]) end
  if redis.call('TTL', KEYS[i]) < 0 then redis.call('EXPIRE', KEYS[i], ARGV[4*i-1]) end
end
return {0, ''}
"""
# What calls that ran spent: KEYS the counters; ARGV per counter amount, ttl.
# (EXPIRE's NX needs Redis 7; the embedded stack may run an older one.)
CHARGE = """
for i = 1, #KEYS do
  redis.call('INCRBYFLOAT', KEYS[i], ARGV[2*i-1])
  if redis.call('TTL', KEYS[i]) < 0 then redis.call('EXPIRE', KEYS[i], ARGV[2*i]) end
end
return 0
"""


class BudgetCounters:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._spend = client.register_script(SPEND)
        self._charge = client.register_script(CHARGE)

    def spend(self, calls: Sequence[Sequence[Counter]]) -> list[tuple[int, float] | None]:
        """For each call, in order, add each of its counters' amount, or
        nothing: (index, used) of the first counter that would pass its limit.
        One round trip for them all; each call's step is atomic on its own."""
        found: list[tuple[int, float] | None] = [None] * len(calls)
        asked = [i for i, counters in enumerate(calls) if counters]
        if not asked:
            return found
        with self.client.pipeline(transaction=False) as pipe:
            for i in asked:
                args: list[str | float | int] = []
                for c in calls[i]:
                    args += [repr(c.amount), repr(c.limit), c.ttl, int(c.strict)]
                keys = [budget_key(c.key) for c in calls[i]]
                self._spend(keys=keys, args=args, client=pipe)
            answers = pipe.execute()
        for i, (index, used) in zip(asked, answers, strict=True):
            found[i] = None if int(index) == 0 else (int(index) - 1, float(used))
        return found

    def standing(self) -> dict[str, float]:
        """What each submitter's budget counter holds now (`Counter.key` ->
        used); a batch's are left out: they end with it."""
        keys = [
            k
            for k in self.client.scan_iter(match=budget_key("*"), count=500)
            if not k.endswith(b":batch")
        ]
        values = self.client.mget(keys) if keys else []
        prefix = len(budget_key(""))
        return {k.decode()[prefix:]: float(v or 0) for k, v in zip(keys, values, strict=True)}

    def charge(self, counters: Sequence[Counter]) -> None:
        """Add what a call spent, whatever the limits say: it has run."""
        if not counters:
            return
        args: list[str | int] = []
        for c in counters:
            args += [repr(c.amount), c.ttl]
        self._charge(keys=[budget_key(c.key) for c in counters], args=args)
