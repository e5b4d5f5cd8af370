"""A call's limits at its start: held to its batch's rates and concurrency
caps right before its tool runs (docs/architecture.md, "Flow control", "Where
each limit is checked"). Here it takes its hit of each rate's window and a
slot of each cap, in one round trip (a call that finds one full takes none of
them: `Throttle.enter`). The sender only looked at what was left
(runtime/batch/limits_at_send.py), so two senders may both have sent into the
last place: the one that comes second here waits (`on_limit: "delay"`: it goes
back to its batch unsent, holding nothing, and the sweep sends it when the
limit allows) or ends (`"refuse"`).

A slot is a lease for the tool's hard limit and a lease more: a worker
killed while holding it leaves it to lapse. With the state away, nothing is
enforced (a warning is logged): limits are a brake, not a permission."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from runtime import clock
from runtime.errors import StateUnavailable
from runtime.flow.limits import Concurrency, Limits, Rate
from runtime.flow.throttle import Entry
from runtime.gate.admission import Admitted, Refused
from runtime.gate.limit_reached import Reached
from runtime.keyspace.names import lease_member
from runtime.ledger.tables import EventKind
from runtime.transport.base import BatchState, Pipe
from runtime.types import CallMessage, ToolResult

log = logging.getLogger("toolrun.limits")


@dataclass(frozen=True)
class Delayed:
    """Sent back to wait: no end, no delivery counted. `result` says why, for
    the worker's trace only."""

    result: ToolResult


def check(
    admission: Admitted, message: CallMessage, state: BatchState | None, *, lease: float
) -> Admitted | Refused | Delayed:
    """Take the call's hits and slots (`lease`: seconds a slot is held), or
    say it must wait or end."""
    taking = entering(admission, message, state, lease=lease)
    if taking is None:
        return admission
    return taking.judged(None)


def entering(
    admission: Admitted, message: CallMessage, state: BatchState | None, *, lease: float
) -> Entering | None:
    """`check`, to ride the worker's look at the call (`BatchState.look`'s
    `rider`: one round trip for both); None if the call's limits take nothing."""
    limits = Limits.from_snapshot(message.policy.get("limits"))
    throttle = state.throttle if state is not None else None
    if not (limits.rates or limits.caps) or throttle is None:
        return None
    tool = admission.spec.name
    member = lease_member(message.batch_id, message.call_id)
    slots = limits.slots(tool)
    windows = limits.windows(tool, message.arguments, admission.spec.host)
    caps = [(scope, cap.max) for cap, scope in slots]
    entry = Entry(throttle, caps, member, lease, [(rate.item, scope) for rate, scope in windows])
    return Entering(admission, message, entry, [*slots, *windows])


@dataclass
class Entering:
    """A call's take of its hits and slots, riding another pipeline (a
    `Rider`: `verdict` is set when its answers land) or on its own (`judged(None)`)."""

    admission: Admitted
    message: CallMessage
    entry: Entry
    limits: list[tuple[Rate | Concurrency, str]]  # its slots' then its windows'
    verdict: Admitted | Refused | Delayed | None = None

    def ride(self, pipe: Pipe) -> None:
        self.entry.ride(pipe)

    def landed(self, answers: list[Any]) -> None:
        self.verdict = self.judged(answers)

    def judged(self, answers: list[Any] | None) -> Admitted | Refused | Delayed:
        """What the take found (`answers` of its ride; None: it did not ride,
        so it goes on its own)."""
        admission, message, entry = self.admission, self.message, self.entry
        throttle = entry.throttle
        try:
            if answers is None:
                full = throttle.enter(entry.slots, entry.member, entry.seconds, entry.windows)
            else:
                full = entry.landed(answers)
            if full is None:
                return admission
            limit, scope = self.limits[full[0]]
            reached = Reached(limit, scope, full[1])
        except StateUnavailable as error:
            log.warning("limits of %s not checked: %s", message.call_id, error)
            return admission
        now, tool = clock.now(), admission.spec.name
        if reached.entry.on_limit == "refuse":
            result = reached.result(message.call_id, tool, now)
            decision = reached.decision(now)
            return Refused(admission.call, admission.spec, result, EventKind.decision, decision)
        try:
            throttle.unsend(message.batch_id, message.call_id)
            throttle.hold_batch(message.batch_id, max(reached.at, now + 0.05))
        except StateUnavailable as error:  # its sent mark ages: the sweep sends it again
            log.warning("%s waits for its limit, unmarked: %s", message.call_id, error)
        return Delayed(reached.result(message.call_id, tool, now))
