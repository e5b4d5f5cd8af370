"""Flow control where the batch already waits: rate limits, concurrency caps
and fair share, applied as the advancer sends calls (docs/architecture.md,
"Flow control").

`gate` looks, for each call about to be sent, at what its rates' windows and
its caps' slots have left (without taking anything: the worker takes its hit
and its slot right before the tool runs, `runtime/execution/throttling.py`).
A call over a limit whose `on_limit` is "refuse" ends at once
(`rate_limited` / `concurrency_limited`); one that must wait stays unsent in
the plan, holding no worker and no thread, and its batch is kept for the sweep
to carry on when the limit allows (or end it `skipped` at its deadline).

Fair share: at most N reads of one submitter are in the shared reads queue or
running; the rest are parked in Redis, per submitter, and the worker that
ends one of them sends the next at once (`finished`), so another submitter's
call waits behind at most N of each submitter's.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable

from runtime.batch.plan import BatchPlan
from runtime.batch.progress import End
from runtime.errors import StateUnavailable
from runtime.gate.limits import Limits, Reached
from runtime.ledger.tables import EventKind
from runtime.registry.capabilities import Registry
from runtime.transport.base import BatchState, Queue
from runtime.transport.names import lease_member
from runtime.types import CallMessage, Risk

log = logging.getLogger("toolrun.flow")
FEW_READS = 32  # reads of one pass whose messages go to the fair share script unasked
RETRY_SLOTS = 1.0  # seconds until a batch waiting for a slot is looked at again (the sweep's pace)

Conclude = Callable[..., bool]


class Flow:
    def __init__(self, *, state: BatchState, queue: Queue, registry: Registry) -> None:
        self.state, self.queue, self.registry = state, queue, registry

    def gate(
        self, plan: BatchPlan, groups: list[list[str]], conclude: Conclude
    ) -> tuple[list[list[str]], bool]:
        """The groups that may be sent now, and whether a call was ended
        (refused at a limit). Without limits, `groups` as they are."""
        limits = Limits.from_snapshot(plan.policy.get("limits"))
        throttle = self.state.throttle
        if not limits or throttle is None or not groups:
            return groups, False
        try:
            return self._gate(plan, groups, limits, conclude)
        except StateUnavailable as error:  # a brake, not a permission: let them go
            log.warning("batch %s: limits not checked: %s", plan.batch.id, error)
            return groups, False

    def _gate(
        self, plan: BatchPlan, groups: list[list[str]], limits: Limits, conclude: Conclude
    ) -> tuple[list[list[str]], bool]:
        throttle, now = self.state.throttle, time.time()
        if limits.rates or limits.caps:  # each step passes the gate: no chains
            groups = [[g[0]] for g in groups]
        room: dict[str, tuple[int, float]] = {}  # scope -> (left now, when it frees one)
        kept, ended, due = [], False, None
        for group in groups:
            planned = plan.calls[group[0]]
            reached = self._room(limits, planned.tool, plan.call(planned.id).arguments, room)
            if reached is None:
                kept.append(group)
            elif reached.entry.on_limit == "refuse":
                result = reached.result(planned.id, planned.tool, now)
                end = End(result, EventKind.decision, not planned.read)
                ended |= conclude(plan, end, reached.decision(now))
            else:
                at = reached.at if reached.status.value == "rate_limited" else now + RETRY_SLOTS
                due = at if due is None else min(due, at)
        if ended and kept:  # the stage's count misses these ends: the sweep moves it on
            due = now + RETRY_SLOTS if due is None else min(due, now + RETRY_SLOTS)
        if due is not None:
            throttle.hold_batch(plan.batch.id, max(due, now + 0.05))
        if limits.fair_share is not None:
            kept = self._share(plan, kept, limits)
        return kept, ended

    def _room(
        self, limits: Limits, tool: str, arguments: object, room: dict[str, tuple[int, float]]
    ) -> Reached | None:
        """The first limit a call of `tool` may not pass now; else None, and
        its place counted in `room` for the calls after it."""
        throttle = self.state.throttle
        spec = self.registry.get(tool)
        host = spec.host if spec is not None else None
        windows, slots = limits.windows(tool, arguments, host), limits.slots(tool)
        for rate, scope in windows:
            if scope not in room:
                room[scope] = throttle.left(rate.item, scope)
        fresh = [(scope, cap.max) for cap, scope in slots if scope not in room]
        for (scope, _), free in zip(fresh, throttle.free(fresh), strict=True):
            room[scope] = (free, 0.0)
        for entry, scope in [*windows, *slots]:
            left, at = room[scope]
            if left <= 0:
                return Reached(entry, scope, at or time.time() + RETRY_SLOTS)
        for _, scope in [*windows, *slots]:
            left, at = room[scope]
            room[scope] = (left - 1, at)
        return None

    def _share(self, plan: BatchPlan, groups: list[list[str]], limits: Limits) -> list[list[str]]:
        """The reads among `groups` that may enter the shared queue now; the
        others are parked for the submitter's next turns."""
        throttle, batch_id = self.state.throttle, plan.batch.id
        reads = [g[0] for g in groups if plan.calls[g[0]].read]
        if not reads:
            return groups
        members = [lease_member(batch_id, c) for c in reads]
        # A large batch's messages go to Redis only for reads not parked yet;
        # a small one's go at once (the script skips those parked already).
        few = len(reads) <= FEW_READS
        parked = [False] * len(reads) if few else throttle.parked(limits.sender, members)
        fresh = [(c, m) for c, m, p in zip(reads, members, parked, strict=True) if not p]
        bodies = [(c, _parcel(m, plan.calls[c].message)) for c, m in fresh]
        cap = limits.fair_share.in_flight_per_key
        admitted = throttle.admit_reads(limits.sender, cap, batch_id, bodies)
        going = {c for (c, _), yes in zip(fresh, admitted, strict=True) if yes}
        return [g for g in groups if not plan.calls[g[0]].read or g[0] in going]

    def finished(self, message: CallMessage) -> None:
        """A call's delivery is over (ended, or sent back to wait): free its
        slots, and send its submitter's next parked reads."""
        limits = Limits.from_snapshot(message.policy.get("limits"))
        throttle = self.state.throttle
        if not limits or throttle is None:
            return
        member = lease_member(message.batch_id, message.call_id)
        scopes = [scope for _, scope in limits.slots(message.tool)]
        share = None
        if limits.fair_share is not None:
            spec = self.registry.get(message.tool)
            if spec is not None and spec.risk is Risk.read:
                share = (limits.sender, limits.fair_share.in_flight_per_key)
        if not scopes and share is None:
            return
        try:
            parcels = throttle.finish(scopes, member, share)
            if parcels:
                self.send_parked(*share, parcels)
        except StateUnavailable as error:  # slots lapse; the sweep sends parked reads
            log.warning("%s: its slots were not freed: %s", message.call_id, error)

    def send_parked(self, who: str, cap: int, parcels: list[str]) -> None:
        """Post `who`'s parked reads whose turn came, each marked sent once.
        One another process sent meanwhile (its batch moved on from a view
        of before its parking) gives its place to the next."""
        while parcels:
            by_batch: dict[str, list[CallMessage]] = defaultdict(list)
            for parcel in parcels:
                message = CallMessage.model_validate(json.loads(parcel)["message"])
                by_batch[message.batch_id].append(message)
            parcels = []
            for batch_id, messages in by_batch.items():
                marked = set(self.state.mark_sent(batch_id, [m.call_id for m in messages]))
                going = [m for m in messages if m.call_id in marked]
                if going:
                    self.queue.post(going, parallel=True)
                for gone in (m for m in messages if m.call_id not in marked):
                    member = lease_member(batch_id, gone.call_id)
                    parcels += self.state.throttle.next_reads(who, cap, member)

    def due(self) -> set[str]:
        """For the sweep: batches whose waiting calls may go now; and parked
        reads whose key has room (a place freed without an end: it lapsed)."""
        throttle = self.state.throttle
        if throttle is None:
            return set()
        try:
            for who, first in throttle.waiting().items():
                message = CallMessage.model_validate(json.loads(first)["message"])
                share = Limits.from_snapshot(message.policy.get("limits")).fair_share
                if share is not None:
                    cap = share.in_flight_per_key
                    self.send_parked(who, cap, throttle.next_reads(who, cap))
            return set(throttle.due(time.time()))
        except StateUnavailable:
            return set()


def _parcel(member: str, message: CallMessage | None) -> str:
    return json.dumps({"member": member, "message": message.wire() if message else None})
