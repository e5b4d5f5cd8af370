"""What Redis keeps of a batch beside the ledger: its plan's copy, and its
record until the ledger has it (`toolrun:unrecorded`: a batch submitted while
the ledger was away, and one sent before it is recorded; docs/architecture.md,
"The ledger" and "Sent before recorded").

A record its submitter wrote itself is dropped later, not at once (with the
plan's copy, if its reads ended before it was written): the drop rides the
next round trip of a submit's send marks, or goes on its own from the
listener's thread once `DROP_SECONDS` have passed with none. That takes a
round trip off every submit's path. A drop lost with the process is the
sweep's: it writes the record again (the ledger's compare-and-set makes that
a no-op) and drops it; a plan's copy then ends with its TTL, as when its
submitter died between the write and the drop.
"""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from typing import Any

import redis
from redis.client import Pipeline

from runtime.errors import StateUnavailable
from runtime.keyspace.names import TTL_SECONDS, UNRECORDED, plan_key
from runtime.transport.base import PlanCopy
from runtime.transport.leases import Leases, reaching
from runtime.transport.patience import persisting

DROP_SECONDS = 0.5  # the longest a written record waits for a round trip to ride
# HSETNX that also answers 1 for the very record it holds: a keep tried again
# after its answer was lost (redis-py's retry, or `patience`) finds its own
# record, not a racer's. KEYS: the kept records; ARGV: batch id, record.
KEEP = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then return 1 end
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return 1 end
return 0
"""


class BatchCopies(Leases):
    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        self._written: dict[str, float] = {}  # batch id -> when its record was written (monotonic)
        self._ended: set[str] = set()  # of those, batches that ended: their plan's copy goes too
        self._dropping = threading.Lock()
        self._keep = client.register_script(KEEP)

    # The plan's copy: the cluster's work, kept beside the ledger's ("A batch the cluster owns").
    def keep_plan(self, batch_id: str, plan: PlanCopy) -> None:
        with reaching(f"batch {batch_id}: cannot keep its plan"):
            self.client.set(plan_key(batch_id), plan_text(plan), ex=TTL_SECONDS)

    def plan(self, batch_id: str) -> dict[str, Any] | None:
        with reaching(f"batch {batch_id}: cannot read its plan"):
            stored = self.client.get(plan_key(batch_id))
        return json.loads(stored) if stored else None

    def drop_plan(self, batch_id: str) -> None:
        with reaching(f"batch {batch_id}: cannot drop its plan"):
            self.client.delete(plan_key(batch_id))

    # Records the ledger does not have yet.
    def keep_record(self, batch_id: str, record: str | bytes, *, patience: float = 0.0) -> bool:
        keep = partial(self._keep, keys=[UNRECORDED], args=[batch_id, record])
        with reaching(f"batch {batch_id}: cannot keep its record"):
            return bool(persisting(patience, keep))

    def kept_record(self, batch_id: str) -> str | None:
        with reaching(f"batch {batch_id}: cannot read its kept record"):
            found = self.client.hget(UNRECORDED, batch_id)
        return None if found is None else found.decode()

    def kept_records(self) -> dict[str, str]:
        with reaching("cannot read the kept batch records"):
            found = self.client.hgetall(UNRECORDED)
        return {k.decode(): v.decode() for k, v in found.items()}

    def drop_record(self, batch_id: str, *, later: bool = False, plan: bool = False) -> None:
        """`later`: its submitter wrote it, and the drop rides a later round
        trip; `plan`: the batch has ended, its plan's copy goes too."""
        if later:
            with self._dropping:
                self._written.setdefault(batch_id, time.monotonic())
                if plan:
                    self._ended.add(batch_id)
            return
        with reaching(f"batch {batch_id}: cannot drop its kept record"):
            self.client.hdel(UNRECORDED, batch_id)
        if plan:
            self.drop_plan(batch_id)

    def drops_ride(self, pipe: Pipeline) -> int:
        """Put the drops waiting into `pipe`, first; how many commands that is.
        Should the pipeline fail, the sweep drops the records, and the plans'
        copies end with their TTL."""
        with self._dropping:
            written, ended = list(self._written), [plan_key(b) for b in self._ended]
            self._written, self._ended = {}, set()
        if written:
            pipe.hdel(UNRECORDED, *written)
        if ended:
            pipe.delete(*ended)
        return bool(written) + bool(ended)

    def drop_due(self, *, every: bool = False) -> None:
        """The drops waiting, on their own, once the oldest has waited
        `DROP_SECONDS` (`every`: whatever their age, as the client closes)."""
        if not self._written:
            return
        with self._dropping:
            oldest = min(self._written.values(), default=time.monotonic())
            if not every and oldest > time.monotonic() - DROP_SECONDS:
                return
        try:
            with (
                reaching("cannot drop the kept batch records"),
                self.client.pipeline(transaction=False) as pipe,
            ):
                self.drops_ride(pipe)
                pipe.execute()
        except StateUnavailable:  # left to the sweep, which writes and drops them
            pass


def plan_text(plan: PlanCopy) -> str:
    """A plan's copy as Redis keeps it: JSON."""
    return plan if isinstance(plan, str) else json.dumps(plan)
