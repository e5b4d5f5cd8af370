"""The two seams between a batch and the world outside the ledger.

`Queue` sends signed task messages to the workers. `BatchState` is what the
processes of a cluster share about a batch while it runs: the marks of what was
sent and what a worker took, the ends announced so far and the bus that carries
them to the client, the copy of the plan, the cancel flag, and the sweep's lock.
The executor, the advancer, the worker and the client's listener use these and
nothing else; implementations raise `StateUnavailable` (never their client
library's own errors) when the state cannot be reached.

`transport/cluster.py` implements both on Celery and Redis, for production;
`transport/memory.py` in one process, running the same `Worker` on threads
(docs/architecture.md, "Seams").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.flow.budgets import Counter
from runtime.flow.throttle import Throttle
from runtime.types import CallMessage, ToolResult

# A plan's copy as its dict, or as the JSON text a submit made once for the copy
# and the record both (runtime/client/first_send.py).
PlanCopy = dict[str, Any] | str


class Inbox(Protocol):
    """One batch's results as they arrive, to one process."""

    cancelled: bool  # the batch was cancelled, from any process

    @property
    def quick(self) -> bool:
        """Whether `results(..., 0)` now reads only what arrived, in memory:
        no round trip (its follower may then read it on the arrival's thread)."""
        ...

    def results(self, waiting: set[str], timeout: float) -> list[ToolResult]:
        """Results (or notices: `awaiting_approval`) of `waiting` calls that
        arrive within about `timeout` seconds; a call's end wins over its notice."""
        ...

    def on_arrival(self, callback: Callable[[], None]) -> None:
        """Call `callback` (it must not block) whenever something arrives for
        the batch, so its follower reads `results` then instead of polling."""
        ...


@dataclass(frozen=True)
class Look:
    """What a worker finds about a call before running it, in one round trip."""

    cancelled: bool  # its batch was cancelled
    delivery: int  # how many times its message has reached a worker, this time included
    result: ToolResult | None  # a result already published (a redelivered message)


@dataclass(frozen=True)
class Known:
    """What the state holds of a batch when it is moved on, read at once."""

    sent: dict[str, float]  # call id -> when it was last sent (epoch seconds)
    started: set[str]  # calls a worker has taken (reads and idempotent calls count here)
    cancelled: bool  # the batch's cancel flag
    ends: dict[str, ToolResult]  # the ends announced so far
    holds: dict[str, float]  # the asked-for calls' leases: seconds left (none or less: ran out)


class Queue(Protocol):
    def post(self, messages: list[CallMessage], *, parallel: bool, chained: bool = False) -> bool:
        """Send signed task messages (`parallel`: to the reads queue; `chained`:
        the first carries the others); False if the broker could not take them
        (what it took may still run: reads are at-least-once, side effects claimed)."""
        ...


class Pipe(Protocol):
    """A round trip being built, as a rider sees it: a script the store
    already holds, called by its digest, with its keys and arguments."""

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: str | int | float) -> object: ...


class Rider(Protocol):
    """Flow control's commands riding a round trip the state makes anyway
    (docs/architecture.md, "Flow control"): `ride` puts them on its Redis
    pipeline, `landed` is given their answers. A state that cannot carry
    them calls `landed(None)`: they go on their own."""

    def ride(self, pipe: Pipe) -> None: ...

    def landed(self, answers: list[Any] | None) -> None: ...


class ResultBus(Protocol):
    """Calls' ends and notices, stored and carried to the processes that
    follow their batches."""

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
        """Store a call's end where clients and workers find it and announce it,
        and release its lease; with `stage`, count it as one more end of that
        stage and return the count; with `hold` (call id, seconds), take the
        lease of that call of the batch (a chain's next step, claimed with
        this end); with `rider`, its commands in the same round trip;
        `drop_plan`: the batch has ended, its plan's copy goes too. Keeps
        trying for `patience` seconds while the state is away."""
        ...

    def stake(self, batch_id: str, result: ToolResult, *, patience: float = 0.0) -> bool:
        """Store `result` as its call's end unless one is stored: True if it
        was. An end that may have ended its call (its row waits for the
        ledger) is published only once staked, so the first one stored is the
        one announced, and the one its buffered row writes (docs/architecture.md,
        "One end per call"). Keeps trying for `patience` seconds while the
        state is away."""
        ...

    def announce(self, batch_id: str, notice: ToolResult, *, reply_to: str | None) -> None:
        """Announce a notice (a call waiting for approval); nothing is stored."""
        ...

    def ends(self, batch_id: str) -> dict[str, ToolResult]:
        """The ends announced so far (the ledger holds them once it is there)."""
        ...

    def recall(self, batch_id: str, call_id: str) -> ToolResult | None:
        """A call's end, if one was published."""
        ...

    def watch(self, batch_id: str) -> Inbox:
        """Start hearing a batch's results; call before sending anything."""
        ...

    def unwatch(self, batch_id: str) -> None: ...


class SendMarks(Protocol):
    """Marks of what was sent and what a worker took, so that two processes
    moving a batch on never both send a call."""

    def mark_sent(
        self,
        batch_id: str,
        call_ids: list[str],
        *,
        again: bool = False,
        plan: PlanCopy | None = None,
        record: str | bytes | None = None,
    ) -> list[str]:
        """Mark calls sent now; the ones this call marked (`again`: all of them),
        so that two processes moving a batch on never both send a call. With
        `plan`, keep the batch's plan copy too, in the same step (`keep_plan`);
        with `record`, the batch's record (`keep_record`)."""
        ...

    def known(self, batch_id: str, call_ids: list[str]) -> Known:
        """`sent`, `started`, `cancelled`, `ends` and the `holds` of `call_ids`,
        read together: what moving the batch on needs of the state."""
        ...

    def sent(self, batch_id: str) -> dict[str, float]:
        """When each call was last sent (epoch seconds); empty after a loss."""
        ...

    def started(self, batch_id: str) -> set[str]:
        """Calls a worker has taken (reads and idempotent calls count here)."""
        ...

    def look(
        self, batch_id: str, call_id: str, *, hold: float | None = None, rider: Rider | None = None
    ) -> Look:
        """For a worker about to run a call: count this delivery, read the
        cancel flag and any result already published, and (`hold`) take the
        call's lease for that many seconds; with `rider`, its commands in the
        same round trip."""
        ...

    def unlook(self, batch_id: str, call_id: str) -> None:
        """Take back what `look` counted and held: the call did not run here
        (it waits for a rate or a slot, "Flow control")."""
        ...

    def hand_on(self, batch_id: str, call_id: str) -> bool:
        """Mark a chain step as having sent its next one; False if it had."""
        ...


class Copies(Protocol):
    """What the state keeps of a batch beside the ledger: the plan's copy, the
    cancel flag, and batch records the ledger could not take at submit
    (docs/architecture.md, "The ledger"), kept until the sweep writes them."""

    def keep_plan(self, batch_id: str, plan: PlanCopy) -> None:
        """A copy of the batch's plan (its dict, or its JSON text), so it goes
        on while the ledger is away."""
        ...

    def plan(self, batch_id: str) -> dict[str, Any] | None: ...

    def drop_plan(self, batch_id: str) -> None:
        """The batch has ended: its plan (arguments unredacted) goes."""
        ...

    def cancelled(self, batch_id: str) -> bool:
        """Whether the batch was cancelled."""
        ...

    def cancel(self, batch_id: str, *, by: str) -> None:
        """Mark the batch cancelled: no call of it starts from now on."""
        ...

    def keep_record(self, batch_id: str, record: str | bytes, *, patience: float = 0.0) -> bool:
        """Keep a batch's first rows (a `BatchRecord`'s JSON) for the sweep,
        unless another record of that batch is kept already: False then (this
        very record kept already is True: a keep tried again). Submitters
        racing for one key while the ledger is away make the same batch id,
        and the first record kept is the batch (docs/architecture.md, "Attach
        and keys"). Keeps trying for `patience` seconds while the state is away."""
        ...

    def kept_record(self, batch_id: str) -> str | None:
        """The record kept for the batch, if there is one."""
        ...

    def kept_records(self) -> dict[str, str]:
        """Batch id -> record JSON, of every record kept."""
        ...

    def drop_record(self, batch_id: str, *, later: bool = False, plan: bool = False) -> None:
        """`later`: its submitter wrote it; the drop may ride a later round
        trip. `plan`: the batch has ended, its plan's copy goes too."""
        ...


class Leases(Protocol):
    """A claimed call is held by a live worker, which renews its hold; the
    sweep is one process's at a time (docs/architecture.md, "Leases")."""

    def hold(self, batch_id: str, call_id: str, seconds: float) -> ToolResult | None:
        """The call is held for `seconds` from now by the process that claimed
        it; in the same round trip, the end published for it, if any (a
        delivery that failed closed with the ledger away said it did not run:
        docs/architecture.md, "One end per call")."""
        ...

    def renew(self, calls: list[tuple[str, str]], seconds: float) -> None:
        """Hold each (batch id, call id) for `seconds` more."""
        ...

    def release(self, batch_id: str, call_id: str) -> None:
        """The call has ended (or was judged lost): nobody holds it."""
        ...

    def left(self, batch_id: str, call_id: str, seconds: float) -> float:
        """Seconds, on the state's own clock, before the advancer may judge the
        call's holder gone (`seconds`: a lease's length); none or less once it
        may, or once the call's end is published. Read by the holder itself,
        which stops its call before then (docs/architecture.md, "Leases")."""
        ...

    def holds(self, batch_id: str, call_ids: list[str]) -> dict[str, float]:
        """Seconds left of the hold of each of `call_ids` that has one (none
        or less: it ran out), on the state's own clock; a call with no hold
        is left out."""
        ...

    def lapsed(self) -> set[tuple[str, str]]:
        """(batch id, call id) of each call whose hold has run out, by the
        state's own clock."""
        ...

    def unheld(self, batch_id: str, call_ids: list[str]) -> dict[str, float]:
        """How long, by the state's own clock, each of `call_ids` (claimed,
        with no hold) has been seen with none: since it was first asked for
        here, or since the state last started empty if that is later (holds
        lost then are given a lease's time to be renewed)."""
        ...

    def hold_sweep(self, holder: str, seconds: float) -> bool:
        """Take the sweep's lease for `holder`, or renew it if `holder` has
        it; False if another holds it."""
        ...

    def release_sweep(self, holder: str) -> None: ...

    def lost(self, holder: str) -> bool:
        """True once after the state lost what it held (a restart without its
        append-only file): every open batch must be looked at."""
        ...


class Budgets(Protocol):
    """Budgets' counters, checked and added to in one step
    (docs/architecture.md, "Usage and budgets")."""

    def spend(self, calls: list[list[Counter]]) -> list[tuple[int, float] | None]:
        """For each call in order, add each of its counters' amount unless one
        would pass its limit: then add nothing for that call, and say (that
        counter's index, what it had used)."""
        ...

    def charge(self, counters: list[Counter]) -> None:
        """Add what a call that ran spent."""
        ...


class BatchState(ResultBus, SendMarks, Copies, Leases, Budgets, Protocol):
    """Every role of the batch's shared state in one object, as a transport
    implements it; a caller that uses one role names that role's protocol."""

    reply_to: str | None  # this process's results channel, where its batches' ends arrive
    # Rates, concurrency slots and fair share across the cluster; None: this
    # state does not enforce them (the in-process transport refuses them).
    throttle: Throttle | None

    def close(self) -> None: ...


class Transport(Queue, BatchState, Protocol):
    """Both seams in one object, as a `Runtime` is given them."""

    # The key its messages are signed with when it brings its own (the in-process
    # transport's); None: the deployment's, from the settings.
    key: bytes | None
