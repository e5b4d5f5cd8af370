"""A call's limits as it is sent, where the batch already waits: rate limits,
concurrency caps and fair share, applied as the advancer sends calls
(docs/architecture.md, "Flow control", "Where each limit is checked"; the
counting is flow control's, `runtime/flow/throttle.py`).

`gate` looks, for each call about to be sent, at what its rates' windows and
its caps' slots have left (without taking anything: the worker takes its hit
and its slot right before the tool runs, `runtime/execution/limits_at_start.py`).
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
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItem

from runtime import clock
from runtime.batch.plan import BatchPlan
from runtime.batch.progress import End
from runtime.errors import StateUnavailable
from runtime.flow.limits import Concurrency, Limits, Rate
from runtime.flow.throttle import Finish, Reads
from runtime.gate.limit_reached import Reached
from runtime.keyspace.names import lease_member
from runtime.ledger.tables import EventKind
from runtime.registry.capabilities import Registry
from runtime.transport.base import BatchState, Pipe, PlanCopy, Queue
from runtime.types import CallMessage, Risk

log = logging.getLogger("toolrun.flow")
RETRY_SLOTS = 1.0  # seconds until a batch waiting for a slot is looked at again (the sweep's pace)

Conclude = Callable[..., bool]


class Flow:
    def __init__(self, *, state: BatchState, queue: Queue, registry: Registry) -> None:
        self.state, self.queue, self.registry = state, queue, registry

    def gate(
        self,
        plan: BatchPlan,
        groups: list[list[str]],
        conclude: Conclude,
        copy: PlanCopy | None = None,
        record: str | bytes | None = None,
    ) -> tuple[list[list[str]], bool]:
        """The groups to post now, each marked sent (`BatchState.mark_sent`;
        one another process sent first is left out), and whether a call was
        ended (refused at a limit). Without limits, `groups` as the marks
        leave them. `copy` and `record`: the plan's copy and the batch's
        record, kept before any end in the same round trip (with limits, the
        look at them and the marks are one round trip too)."""
        limits = Limits.from_snapshot(plan.policy.get("limits"))
        throttle = self.state.throttle
        if not limits or throttle is None or not groups:
            return self._mark(plan, groups, copy, record), False
        try:
            if record is not None:
                self.state.keep_record(plan.batch.id, record)
            return self._gate(plan, groups, limits, conclude, copy)
        except StateUnavailable as error:  # a brake, not a permission: let them go
            log.warning("batch %s: limits not checked: %s", plan.batch.id, error)
            return self._mark(plan, groups, copy, None), False

    def _mark(
        self,
        plan: BatchPlan,
        groups: list[list[str]],
        copy: PlanCopy | None,
        record: str | bytes | None,
    ) -> list[list[str]]:
        sending = [c for g in groups for c in g]
        marked = set(self.state.mark_sent(plan.batch.id, sending, plan=copy, record=record))
        return [g for g in groups if g[0] in marked]

    def _gate(
        self,
        plan: BatchPlan,
        groups: list[list[str]],
        limits: Limits,
        conclude: Conclude,
        copy: PlanCopy | None,
    ) -> tuple[list[list[str]], bool]:
        throttle, now = self.state.throttle, clock.now()
        if limits.rates or limits.caps:  # each step passes the gate: no chains
            groups = [[g[0]] for g in groups]
        applying = [self._applying(limits, plan.calls[g[0]].tool, plan, g[0]) for g in groups]
        windows = {scope: rate.item for ws, _ in applying for rate, scope in ws}
        slots = {scope: cap.max for _, ss in applying for cap, scope in ss}
        reads = self._reads(plan, groups, limits)
        kept = (plan.batch.id, copy) if copy is not None else None
        shared = reads is not None  # its reads are marked as the fair share admits them
        marking = [c for g in groups if not (shared and plan.calls[g[0]].read) for c in g]
        calls = Counter(scope for ws, _ in applying for _, scope in ws)
        room, admitted, marked = throttle.look(
            list(_swap(windows)),
            list(slots.items()),
            reads,
            kept,
            (plan.batch.id, marking),
            [calls[scope] for scope in windows],
        )
        kept, refused, due = [], [], None
        for group, (ws, ss) in zip(groups, applying, strict=True):
            reached = _reached([*ws, *ss], room, now)
            if reached is None:
                kept.append(group)
            elif reached.entry.on_limit == "refuse":
                refused.append((plan.calls[group[0]], reached))
            else:
                at = reached.at if reached.status.value == "rate_limited" else now + RETRY_SLOTS
                due = at if due is None else min(due, at)
        keeping = {g[0] for g in kept}
        if unmark := [c for g in groups if g[0] not in keeping for c in g if c in marked]:
            throttle.unsend(plan.batch.id, *unmark)  # held or ended: not sent after all
        ended = False
        for planned, reached in refused:
            result = reached.result(planned.id, planned.tool, now)
            end = End(result, EventKind.decision, not planned.read)
            ended |= conclude(plan, end, reached.decision(now))
        if ended and kept:  # the stage's count misses these ends: the sweep moves it on
            due = now + RETRY_SLOTS if due is None else min(due, now + RETRY_SLOTS)
        if due is not None:
            throttle.hold_batch(plan.batch.id, max(due, now + 0.05))
        if reads is not None:
            going = {c for (c, _), a in zip(reads[3], admitted, strict=True) if a == "s"}
            for call_id in going - keeping:  # admitted, then held or ended: its place goes on
                self._give_back(limits, lease_member(plan.batch.id, call_id))
            asked = [c for (c, _), a in zip(reads[3], admitted, strict=True) if a == "n"]
            if asked := [c for c in asked if c in keeping]:  # the key is at its cap: park them
                marked |= self._park(plan, reads, asked)
        return [g for g in kept if g[0] in marked], ended

    def _park(self, plan: BatchPlan, reads: Reads, asked: list[str]) -> set[str]:
        """Park `asked`, reads of a key at its cap, with their messages; the
        ids of those admitted after all (a place freed meanwhile), marked sent."""
        batch_id = plan.batch.id
        bodies = [(c, _parcel(lease_member(batch_id, c), plan.calls[c].message)) for c in asked]
        admit = self.state.throttle.admit_reads(reads[0], reads[1], batch_id, bodies)
        going = [c for c, yes in zip(asked, admit, strict=True) if yes]
        return set(self.state.mark_sent(batch_id, going)) if going else set()

    def _applying(
        self, limits: Limits, tool: str, plan: BatchPlan, call_id: str
    ) -> tuple[list[tuple[Rate, str]], list[tuple[Concurrency, str]]]:
        """The windows and slots a call of `tool` counts in."""
        if not (limits.rates or limits.caps):
            return [], []
        spec = self.registry.get(tool)
        host = spec.host if spec is not None else None
        arguments = plan.call(call_id).arguments if limits.rates else None
        return limits.windows(tool, arguments, host), limits.slots(tool)

    @staticmethod
    def _reads(plan: BatchPlan, groups: list[list[str]], limits: Limits) -> Reads | None:
        """The reads among `groups` for the fair share's script, without
        their messages (those it would park are asked for after)."""
        if limits.fair_share is None:
            return None
        reads = [(g[0], "") for g in groups if plan.calls[g[0]].read]
        if not reads:
            return None
        return limits.sender, limits.fair_share.in_flight_per_key, plan.batch.id, reads

    def _give_back(self, limits: Limits, member: str) -> None:
        who, cap = limits.sender, limits.fair_share.in_flight_per_key
        self.send_parked(who, cap, self.state.throttle.next_reads(who, cap, member))

    def finished(self, message: CallMessage) -> None:
        """A call's delivery is over (ended, or sent back to wait): free its
        slots, and send its submitter's next parked reads."""
        finishing = self.finishing(message)
        if finishing is not None:
            finishing.landed(None)

    def finishing(self, message: CallMessage) -> Finishing | None:
        """`finished`, to ride the worker's publish of the call's end (one
        round trip for both); None if the call's limits hold nothing."""
        limits = Limits.from_snapshot(message.policy.get("limits"))
        throttle = self.state.throttle
        if not limits or throttle is None:
            return None
        member = lease_member(message.batch_id, message.call_id)
        scopes = [scope for _, scope in limits.slots(message.tool)]
        share = None
        if limits.fair_share is not None:
            spec = self.registry.get(message.tool)
            if spec is not None and spec.risk is Risk.read:
                share = (limits.sender, limits.fair_share.in_flight_per_key)
        if not scopes and share is None:
            return None
        return Finishing(self, Finish(throttle, scopes, member, share), message.call_id)

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
                try:
                    message = CallMessage.model_validate(json.loads(first)["message"])
                except (ValueError, KeyError, TypeError) as error:  # not one we parked
                    log.warning("%s's first parked read is not a call message: %s", who, error)
                    continue
                share = Limits.from_snapshot(message.policy.get("limits")).fair_share
                if share is not None:
                    cap = share.in_flight_per_key
                    self.send_parked(who, cap, throttle.next_reads(who, cap))
            return set(throttle.due(clock.now()))
        except StateUnavailable:
            return set()


@dataclass(frozen=True)
class Finishing:
    """A call's finish riding another pipeline (`BatchState.publish`'s
    `rider`): `ride` adds its commands, `landed` sends the parked reads whose
    turn came; `landed(None)`: it did not ride, so it goes on its own."""

    flow: Flow
    finish: Finish
    call_id: str

    def ride(self, pipe: Pipe) -> None:
        self.finish.ride(pipe)

    def landed(self, answers: list[Any] | None) -> None:
        finish = self.finish
        try:
            if answers is None:
                parcels = finish.throttle.finish(finish.scopes, finish.member, finish.share)
            else:
                parcels = finish.landed(answers)
            if parcels:
                self.flow.send_parked(*finish.share, parcels)
        except StateUnavailable as error:  # slots lapse; the sweep sends parked reads
            log.warning("%s: its slots were not freed: %s", self.call_id, error)


def _swap(windows: dict[str, RateLimitItem]) -> list[tuple[RateLimitItem, str]]:
    return [(item, scope) for scope, item in windows.items()]


def _reached(
    applying: list[tuple[Rate | Concurrency, str]], room: dict[str, tuple[int, float]], now: float
) -> Reached | None:
    """The first limit a call may not pass now; else None, and its place
    counted in `room` for the calls after it."""
    for entry, scope in applying:
        left, at = room[scope]
        if left <= 0:
            return Reached(entry, scope, at or now + RETRY_SLOTS)
    for _, scope in applying:
        left, at = room[scope]
        room[scope] = (left - 1, at)
    return None


def _parcel(member: str, message: CallMessage | None) -> str:
    return json.dumps({"member": member, "message": message.wire() if message else None})
