"""Every name two processes must agree on: the queues, the task, the Redis keys
and channels, and how long each key lives. Nothing else spells them
(docs/architecture.md, "Names")."""

from __future__ import annotations

TASK = "toolrun.execute"  # the one task: a signed call message in, its result published
READS = "reads"  # read-only calls: run side by side
EFFECTS = "effects"  # every other call: one step at a time, in order
QUEUES = (READS, EFFECTS)
DEAD = "toolrun.dead"  # RabbitMQ: where a message delivered too often goes; the sweep ends it

TTL_SECONDS = 24 * 3600  # how long a batch's keys outlive it
_BATCH = "toolrun:batch:"


def results_key(batch_id: str) -> str:
    """A batch's results hash, and its channel (cancel notices, and results of
    messages that name no `reply_to`)."""
    return f"{_BATCH}{batch_id}:results"


BATCH_CHANNELS = results_key("*")  # every batch's channel, as a pattern


def batch_of(channel: str) -> str:
    """The batch id in a batch channel's name."""
    return channel.removeprefix(_BATCH).removesuffix(":results")


def reply_channel(client_id: str) -> str:
    """Where workers publish the results of one client's calls."""
    return f"toolrun:client:{client_id}:results"


def cancel_key(batch_id: str) -> str:
    """Set (to who cancelled) once a batch is cancelled."""
    return f"{_BATCH}{batch_id}:cancelled"


CANCEL_NOTICE = "__cancel__"  # published on a batch's channel when it is cancelled


def deliveries_key(batch_id: str) -> str:
    """How many times each call's message reached a worker (reads and idempotent calls)."""
    return f"{_BATCH}{batch_id}:deliveries"


def handed_on_key(batch_id: str, call_id: str) -> str:
    """Set once a chain step has sent the next one (a redelivered step sends it no more)."""
    return f"{_BATCH}{batch_id}:handed-on:{call_id}"


def sent_key(batch_id: str) -> str:
    """When each call was last sent: so that two processes moving the batch on
    never both send it, and a call no worker took is noticed."""
    return f"{_BATCH}{batch_id}:sent"


def plan_key(batch_id: str) -> str:
    """A copy of the batch's plan, for while the ledger is away."""
    return f"{_BATCH}{batch_id}:plan"


def stages_key(batch_id: str) -> str:
    """How many calls of each stage have ended: the worker that ends a stage's
    last call moves the batch on."""
    return f"{_BATCH}{batch_id}:stages"


SWEEP_LOCK = "toolrun:sweep"  # the sweep's lease: the holder's id, expiring unless renewed
EPOCH_KEY = "toolrun:epoch"  # when Redis started empty; gone after it lost its data
UNRECORDED = "toolrun:unrecorded"  # hash: batch id -> its first rows, for the sweep to write
SERVER_KEY = "toolrun:server"  # run id of the Redis server the sweep last saw (failovers)
LEASES = "toolrun:leases"  # sorted set: "<batch id> <call id>" of a claimed call -> expiry
# (on Redis's clock: "Leases")


def unheld_key(batch_id: str) -> str:
    """A batch's hash: call id -> when (Redis's clock) its claim was first seen
    with no lease, which a lease's time later counts the call as lost."""
    return f"{_BATCH}{batch_id}:unheld"


def lease_member(batch_id: str, call_id: str) -> str:
    """A claimed call's member of `LEASES`; a batch id holds no space, so the
    first one ends it."""
    return f"{batch_id} {call_id}"


def call_of_lease(member: str) -> tuple[str, str]:
    """(batch id, call id) of a member of `LEASES`."""
    batch_id, _, call_id = member.partition(" ")
    return batch_id, call_id


# Operators' tallies (runtime/transport/tallies.py): counted as ends are published.
CALLS_TALLY = "toolrun:tally:calls"  # hash: "<tool>\n<status>" -> calls ended
SECONDS_TALLY = "toolrun:tally:seconds"  # hash: "<tool>\n<bucket>" -> calls; "<tool>\nsum" -> s


def queue_lists(queue: str) -> list[str]:
    """The broker's lists of one queue: kombu's Redis transport keeps a list per
    priority step (0, 3, 6, 9), the first under the queue's own name."""
    return [queue, *(f"{queue}\x06\x16{step}" for step in (3, 6, 9))]


def budget_key(counter: str) -> str:
    """A budget's counter in one window (`flow.budgets.Counter.key`: the
    file, the budget, the submitter or batch, the window), expiring after it."""
    return f"toolrun:budget:{counter}"


# Flow control (runtime/flow/throttle.py; docs/architecture.md, "Flow control").
HELD = "toolrun:held"  # sorted set: batch id with calls waiting for a rate or slot -> when due


PARKING = "toolrun:share:parking"  # set: submitters that have parked reads (the sweep's look)


def slots_key(scope: str) -> str:
    """A concurrency cap's slots in one scope (`<file tag>:<name>:<tool or
    key>`): sorted set of "<batch id> <call id>" -> when the slot lapses."""
    return f"toolrun:slots:{scope}"


def in_flight_key(principal: str) -> str:
    """A submitter's reads in the shared queue or running (fair share):
    sorted set of "<batch id> <call id>" -> when its place lapses."""
    return f"toolrun:share:{principal}:in-flight"


def parked_key(principal: str) -> str:
    """A submitter's reads waiting their turn: a list of their messages."""
    return f"toolrun:share:{principal}:parked"


def parked_set_key(principal: str) -> str:
    """The members of `parked_key`, to find one without reading the list."""
    return f"toolrun:share:{principal}:parked-set"
