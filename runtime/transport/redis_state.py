"""The batch's shared state in Redis (the `BatchState` seam).

A worker stores a call's end in the batch's results hash and publishes it on
the channel of the client that sent the call, in one pipelined round trip. The
client subscribes before it sends anything (`transport/listener.py`), so it
never misses an end, and reads the hash when it wants to be sure (a dropped
connection loses pub/sub messages, not keys). Celery's `GroupResult.get()`
polls; this does not. Leases are `runtime.transport.leases`'s, kept
batch records `runtime.transport.copies`'s. Redis's own
errors stop here: past this class they are `StateUnavailable`.
"""

from __future__ import annotations

import threading

import redis

from runtime import clock
from runtime.flow.budget_counters import BudgetCounters
from runtime.flow.budgets import Counter
from runtime.flow.throttle import Throttle
from runtime.keyspace.names import (
    CANCEL_NOTICE,
    LEASES,
    TTL_SECONDS,
    UNRECORDED,
    cancel_key,
    deliveries_key,
    handed_on_key,
    lease_member,
    plan_key,
    results_key,
    sent_key,
)
from runtime.transport import riding, state_scripts
from runtime.transport.base import Inbox, Known, Look, PlanCopy, Rider
from runtime.transport.copies import BatchCopies, plan_text
from runtime.transport.leases import left, reaching
from runtime.transport.listener import Listener
from runtime.transport.patience import persisting
from runtime.types import ToolResult


class RedisState(BatchCopies):
    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        clock.follow(client.time)  # "One clock"
        self._listener: Listener | None = None
        self._listening = threading.Lock()
        self._budget_counters = BudgetCounters(client)
        self.throttle: Throttle | None = Throttle(client)  # "Flow control"
        self._unlook = client.register_script(state_scripts.UNLOOK)
        self._look = client.register_script(state_scripts.LOOK)
        self._publish = client.register_script(state_scripts.PUBLISH)

    @property
    def listener(self) -> Listener:
        """The process's one results subscription, made when a batch is first watched."""
        with self._listening:  # two first submits at once (the gateway's offload threads)
            if self._listener is None:
                self._listener = Listener(self.client, chore=self.drop_due)
        return self._listener

    @property
    def reply_to(self) -> str:
        return self.listener.channel

    # The result bus.
    def publish(
        self,
        batch_id: str,
        result: ToolResult,
        *,
        reply_to: str | None,
        stage: int | None = None,
        patience: float = 0.0,
        hold: tuple[str, float] | None = None,
        rider: Rider | None = None,
        drop_plan: bool = False,
    ) -> int | None:
        """Store and announce `result` (on `reply_to`, as "<batch id>\\n<JSON>",
        else on the batch's channel), and count it as one more end of its
        `stage`. Only the reporter whose end the ledger took publishes
        (docs/architecture.md, "One end per call"). `rider`: the call's
        finish in flow control, in the same round trip."""
        payload = result.model_dump_json()
        announced = f"{batch_id}\n{payload}" if reply_to else payload
        channel = reply_to or results_key(batch_id)
        end = state_scripts.Publication(
            batch_id, result, payload, channel, announced, stage, hold, drop_plan
        )
        with reaching(f"the end of {result.call_id} cannot be published"):
            return persisting(patience, lambda: riding.publish(self._publish, end, rider))

    def stake(self, batch_id: str, result: ToolResult, *, patience: float = 0.0) -> bool:
        stored = (results_key(batch_id), result.call_id, result.model_dump_json())
        with reaching(f"the end of {result.call_id} cannot be staked"):
            return bool(persisting(patience, lambda: self.client.hsetnx(*stored)))

    def announce(self, batch_id: str, notice: ToolResult, *, reply_to: str | None) -> None:
        payload = notice.model_dump_json()
        with reaching(f"the notice of {notice.call_id} cannot be announced"):
            self.client.publish(
                reply_to or results_key(batch_id), f"{batch_id}\n{payload}" if reply_to else payload
            )

    def ends(self, batch_id: str) -> dict[str, ToolResult]:
        with reaching(f"batch {batch_id}: its ends cannot be read"):
            stored = self.client.hgetall(results_key(batch_id))
        return {k.decode(): ToolResult.model_validate_json(v) for k, v in stored.items()}

    def watch(self, batch_id: str) -> Inbox:
        return self.listener.watch(batch_id)

    def unwatch(self, batch_id: str) -> None:
        self.listener.unwatch(batch_id)

    # Marks of what was sent and taken.
    def mark_sent(
        self,
        batch_id: str,
        call_ids: list[str],
        *,
        again: bool = False,
        plan: PlanCopy | None = None,
        record: str | bytes | None = None,
    ) -> list[str]:
        """With `plan` (and `record`), the batch's plan copy (and its record:
        `keep_record`) are kept in the same round trip (the submit's first
        send: docs/architecture.md, "Round trips and memory")."""
        if not call_ids and plan is None and record is None:
            return []
        now = str(clock.now())
        with (
            reaching(f"batch {batch_id}: cannot mark what was sent"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            dropped = self.drops_ride(pipe)  # records written since ("Sent before recorded")
            if plan is not None:
                pipe.set(plan_key(batch_id), plan_text(plan), ex=TTL_SECONDS)
            if record is not None:
                pipe.hset(UNRECORDED, batch_id, record)
            for call_id in call_ids:
                (pipe.hset if again else pipe.hsetnx)(sent_key(batch_id), call_id, now)
            pipe.expire(sent_key(batch_id), TTL_SECONDS)
            first = dropped + (plan is not None) + (record is not None)
            marked = pipe.execute()[first:-1]
        return [call_id for call_id, new in zip(call_ids, marked, strict=True) if again or new]

    def known(self, batch_id: str, call_ids: list[str]) -> Known:
        """What an advance reads of the batch, in one pipelined round trip:
        marks of what was sent and taken, the cancel flag, the ends announced,
        and the leases of `call_ids`."""
        with (
            reaching(f"batch {batch_id}: cannot read what it holds"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            pipe.hgetall(sent_key(batch_id))
            pipe.hkeys(deliveries_key(batch_id))
            pipe.exists(cancel_key(batch_id))
            pipe.hgetall(results_key(batch_id))
            if call_ids:  # with Redis's clock: leases are judged on it ("Leases")
                pipe.zmscore(LEASES, [lease_member(batch_id, c) for c in call_ids])
                pipe.time()
            sent, started, cancelled, stored, *held = pipe.execute()
        return Known(
            sent={k.decode(): float(v) for k, v in sent.items()},
            started={key.decode() for key in started},
            cancelled=bool(cancelled),
            ends={k.decode(): ToolResult.model_validate_json(v) for k, v in stored.items()},
            holds=left(call_ids, *held) if held else {},
        )

    def sent(self, batch_id: str) -> dict[str, float]:
        with reaching(f"batch {batch_id}: cannot read what was sent"):
            found = self.client.hgetall(sent_key(batch_id))
        return {k.decode(): float(v) for k, v in found.items()}

    def started(self, batch_id: str) -> set[str]:
        with reaching(f"batch {batch_id}: cannot read what was taken"):
            return {key.decode() for key in self.client.hkeys(deliveries_key(batch_id))}

    def look(
        self, batch_id: str, call_id: str, *, hold: float | None = None, rider: Rider | None = None
    ) -> Look:
        """Cancel flag, delivery count (counted here), stored result and the
        call's lease, in one script and one round trip (`transport/riding.py`):
        reads and idempotent calls keep their deliveries here, not in the
        ledger, so each costs one ledger transaction in all. `rider`: the
        call's take in flow control, in the same round trip."""
        with reaching(f"cannot look at {call_id}"):
            cancelled, delivery, stored = riding.look(self._look, batch_id, call_id, hold, rider)
        result = ToolResult.model_validate_json(stored) if stored else None
        return Look(bool(cancelled), int(delivery), result)

    def unlook(self, batch_id: str, call_id: str) -> None:
        """A delivery counted to none is no delivery: the call was not taken
        (`known`'s `started`), so the batch sends it again."""
        keys = [deliveries_key(batch_id), LEASES]
        with reaching(f"cannot take back the look at {call_id}"):
            self._unlook(keys=keys, args=[call_id, lease_member(batch_id, call_id)])

    def recall(self, batch_id: str, call_id: str) -> ToolResult | None:
        """A call's end, if one was published."""
        with reaching(f"cannot read the end of {call_id}"):
            stored = self.client.hget(results_key(batch_id), call_id)
        return ToolResult.model_validate_json(stored) if stored else None

    def hand_on(self, batch_id: str, call_id: str) -> bool:
        with reaching(f"cannot mark {call_id} as handed on"):
            return bool(
                self.client.set(handed_on_key(batch_id, call_id), 1, nx=True, ex=TTL_SECONDS)
            )

    # The cancel flag.
    def cancelled(self, batch_id: str) -> bool:
        with reaching(f"batch {batch_id}: cannot read its cancel flag"):
            return bool(self.client.exists(cancel_key(batch_id)))

    def cancel(self, batch_id: str, *, by: str) -> None:
        """Mark a batch cancelled (workers start none of its calls from now on)
        and wake whoever follows it, wherever it runs."""
        with (
            reaching(f"batch {batch_id}: cannot flag it cancelled"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            pipe.set(cancel_key(batch_id), by, ex=TTL_SECONDS)
            pipe.publish(results_key(batch_id), CANCEL_NOTICE)
            pipe.execute()

    # Budgets (docs/architecture.md, "Usage and budgets").
    def spend(self, calls: list[list[Counter]]) -> list[tuple[int, float] | None]:
        with reaching("checking a budget"):
            return self._budget_counters.spend(calls)

    def charge(self, counters: list[Counter]) -> None:
        with reaching("counting a call's spending"):
            self._budget_counters.charge(counters)

    def budgets_used(self) -> dict[str, float]:
        """Each submitter's budget counter now: for `/metrics`."""
        with reaching("reading the budgets"):
            return self._budget_counters.standing()

    def close(self) -> None:
        self.drop_due(every=True)
        if self._listener is not None:
            self._listener.close()
        self.client.close()
