"""The numbers operators and autoscalers read (docs/architecture.md, "Traces and
metrics"), from the cluster's Redis: calls ended by tool and status and their
run times (tallied in the round trip that publishes each end), calls waiting
in each queue (the broker's lists), calls running (the live leases, each
under its queue by the batch's plan)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

import redis

from runtime.errors import StateUnavailable
from runtime.keyspace.names import (
    CALLS_TALLY,
    EFFECTS,
    LEASES,
    QUEUES,
    READS,
    SECONDS_TALLY,
    call_of_lease,
    plan_key,
    queue_lists,
)
from runtime.keyspace.scripted import LOST
from runtime.types import Status, ToolResult

# Upper bounds (seconds) of the run-time histogram's buckets; +Inf is implied.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
UNKNOWN_TOOL = "(unknown)"  # the tool of every call whose name no registry knows
PLANS_KEPT = 4096  # batches whose calls' queues one reader remembers (a plan never changes)


def fields(result: ToolResult) -> tuple[str, str | None, str, float]:
    """What one end adds, counted by the publish's script (`state_scripts.PUBLISH`):
    its field of the calls' tally, and if it ran its run time's bucket field,
    sum field and seconds (else None for the bucket: refusals, skips and early
    ends never ran)."""
    # A name the registry does not know is the model's to make up: one field for all.
    tool = UNKNOWN_TOOL if result.status is Status.unknown_tool else result.tool
    counted = f"{tool}\n{result.status.value}"
    if result.duration_ms <= 0:
        return counted, None, "", 0.0
    seconds = result.duration_ms / 1000
    bucket = next((str(b) for b in BUCKETS if seconds <= b), "+Inf")
    return counted, f"{tool}\n{bucket}", f"{tool}\nsum", seconds


@dataclass
class RunTimes:
    buckets: dict[str, int] = field(default_factory=dict)  # upper bound -> calls (not cumulative)
    total: float = 0.0  # seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus's buckets: (upper bound, calls at most that long), +Inf last."""
        running, found = 0, []
        for bound in [*map(str, BUCKETS), "+Inf"]:
            running += self.buckets.get(bound, 0)
            found.append((bound, running))
        return found


@dataclass
class Figures:
    calls: dict[tuple[str, str], int]  # (tool, status) -> calls ended
    run_times: dict[str, RunTimes]  # tool -> its histogram
    waiting: dict[str, int]  # queue -> messages in the broker
    running: dict[str, int]  # queue -> calls holding a live lease


class Tallies:
    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._queues: dict[str, dict[str, str]] = {}  # batch id -> call id -> queue

    def read(self) -> Figures:
        """Every figure, in two or three round trips; `StateUnavailable` if Redis is away."""
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hgetall(CALLS_TALLY)
                pipe.hgetall(SECONDS_TALLY)
                for queue in QUEUES:
                    for name in queue_lists(queue):
                        pipe.llen(name)
                pipe.zrange(LEASES, 0, -1, withscores=True)
                pipe.time()  # leases are live by Redis's clock ("Leases")
                calls, seconds, *lengths, leases, clock = pipe.execute()
            now = clock[0] + clock[1] / 1_000_000
            leased = [call_of_lease(_text(m)) for m, until in leases if until > now]
            running = self._running(leased)
        except LOST as error:
            raise StateUnavailable(f"cannot read the cluster's figures: {error}") from error
        per_queue = len(queue_lists(READS))
        waiting = {
            q: sum(lengths[i * per_queue : (i + 1) * per_queue]) for i, q in enumerate(QUEUES)
        }
        return Figures(_calls(calls), _run_times(seconds), waiting, running)

    def _running(self, leased: list[tuple[str, str]]) -> dict[str, int]:
        unknown = sorted({batch for batch, _ in leased if batch not in self._queues})
        if unknown:
            with self.client.pipeline(transaction=False) as pipe:
                for batch_id in unknown:
                    pipe.get(plan_key(batch_id))
                for batch_id, plan in zip(unknown, pipe.execute(), strict=True):
                    if plan:
                        self._remember(batch_id, json.loads(plan))
        counted = Counter(self._queues.get(b, {}).get(c, EFFECTS) for b, c in leased)
        return {queue: counted.get(queue, 0) for queue in QUEUES}

    def _remember(self, batch_id: str, plan: dict) -> None:
        if len(self._queues) >= PLANS_KEPT:
            self._queues.pop(next(iter(self._queues)))
        self._queues[batch_id] = {
            call_id: READS if call.get("read") else EFFECTS
            for call_id, call in plan.get("calls", {}).items()
        }


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _calls(raw: dict) -> dict[tuple[str, str], int]:
    found = {}
    for key, count in raw.items():
        tool, _, status = _text(key).partition("\n")
        found[(tool, status)] = int(count)
    return found


def _run_times(raw: dict) -> dict[str, RunTimes]:
    found: dict[str, RunTimes] = {}
    for key, value in raw.items():
        tool, _, bound = _text(key).partition("\n")
        times = found.setdefault(tool, RunTimes())
        if bound == "sum":
            times.total = float(value)
        else:
            times.buckets[bound] = int(value)
    return found
