"""How a batch's first stage goes out when its record is not written before
it: a batch of allowed reads sent first and recorded while they run, and a
batch submitted while the ledger is away, which fails closed
(docs/architecture.md, "Sent before recorded" and "The ledger")."""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic_core import PydanticSerializationError

from runtime.batch import plan as plans
from runtime.batch.advance import Advancer
from runtime.client.audit import BatchAudit, Recording
from runtime.client.events import BatchEvents
from runtime.errors import StateUnavailable
from runtime.gate.admission import Admitted, Refused
from runtime.results import endings
from runtime.transport.base import Transport
from runtime.types import Risk

log = logging.getLogger("toolrun.batch")
# Seconds a submit without the ledger waits for Redis (a restart) to keep its
# record and send its reads, before it leaves them to the sweep ("The ledger").
PATIENCE = 5.0


def reads_only(plan: plans.BatchPlan) -> bool:
    """Whether every call of `plan` is an allowed read or refused already, and
    at least one runs: no call waits for an approval, a claim or a limit."""
    effects = [planned.effect for planned in plan.calls.values()]
    readable = all(p.read for p in plan.calls.values() if p.effect == "allow")
    return (
        "allow" in effects
        and readable
        and set(effects) <= {"allow", "refused"}
        and not plan.policy.get("limits")
    )


def send_first(
    audit: BatchAudit,
    admissions: list,
    plan: plans.BatchPlan,
    columns: dict[str, Any],
    *,
    advancer: Advancer,
    transport: Transport,
    events: BatchEvents,
) -> None:
    """A batch of allowed reads and refusals, with no key, is sent before its
    record is written, and recorded while its reads run: no side effect
    waits for its decision row, and no other submitter can hold its id
    (docs/architecture.md, "Sent before recorded"). The record goes to
    Redis first (`keep_record`), so a submitter that dies between the send
    and the write leaves it to the sweep, as one that found the ledger away
    does. Redis's keeping the record and the first marks are one round trip,
    before the send: if it fails nothing was sent, and the record's write
    lets the sweep send the reads.

    The plan's JSON is made once, for its copy and inside the kept record;
    the ledger's row of it (a dict) only once the reads are sent, so the
    send never holds both (docs/architecture.md, "Round trips and memory")."""
    batch = plan.batch
    copy = plan_json(plan)
    record = audit.prepare(admissions, columns=columns)
    refusals = {a.call.id: a.result for a in admissions if isinstance(a, Refused)}
    for result in refusals.values():
        events.end(result)
    kept = record.dumps(plan_text=copy).encode()  # redis-py packs bytes with no encoded copy
    try:  # the record rides in the round trip of the plan's copy and the send marks
        advancer.begin(plan, refusals, copy=copy, record=kept)
    except Exception as error:  # noqa: BLE001 - nothing sent: recorded, the sweep sends it
        log.warning("batch %s: its first stage waits for the sweep: %s", batch.id, error)
    del copy, kept
    audit.planned(plan.model_dump(mode="json"))
    recording = audit.write()
    if recording is Recording.buffered:  # its kept record lands with the ledger
        audit.keep(audit.closing([]))
        return
    # Recorded (by this write, or by a sweep that found it kept): dropped off
    # the submit's path (transport/copies.py), with the plan's copy if its reads
    # ended first (their workers could not mark it ended, this write did).
    transport.drop_record(batch.id, later=True, plan=recording is Recording.ended)


def without_ledger(
    audit: BatchAudit,
    admissions: list,
    plan: plans.BatchPlan,
    *,
    transport: Transport,
    events: BatchEvents,
) -> bool:
    """The ledger away at submit: the batch fails closed (its side effects end
    unrun), its reads run now, and its record waits, kept in Redis too. False:
    another submitter of its key kept the batch's record first, and this one
    wrote and sent nothing (docs/architecture.md, "Attach and keys").

    Once its record is kept in this process the batch will run, so nothing
    after raises: Redis away too, the submit waits `PATIENCE` seconds for it
    (a restart), then leaves its reads to the sweep, which sends them once
    the record lands in the ledger (docs/architecture.md, "The ledger")."""
    reads = [
        a
        for a in admissions
        if isinstance(a, Admitted)
        and a.spec.risk is Risk.read
        and a.decision.effect.value == "allow"
    ]
    closed = [
        endings.ledger_unavailable(a.call.id, a.spec.name)
        for a in admissions
        if isinstance(a, Admitted) and a not in reads
    ]
    record = audit.closing(closed)  # the batch's rows with these ends
    batch_id = plan.batch.id
    try:  # the cluster's copy first: this process may not live until the ledger is back
        if not transport.keep_record(batch_id, record.dumps(), patience=PATIENCE):
            return False
        reachable = True
    except StateUnavailable as error:
        log.error("batch %s: its record waits in this process only: %s", batch_id, error)
        reachable = False
    audit.keep(record)  # and this process's, written once the ledger is back
    for result in closed:
        events.end(result)
    if reads and reachable:  # no side effect of this batch runs, so no read can miss one
        send_reads(plan, [a.call.id for a in reads], transport=transport)
    elif reads:
        log.warning("batch %s: Redis away, the sweep sends its reads", batch_id)
    return True


def send_reads(plan: plans.BatchPlan, call_ids: list[str], *, transport: Transport) -> None:
    """Mark `call_ids` sent, as the advancer marks what it sends (once the
    plan lands, the sweep waits for these instead of sending them again),
    and post them. Redis lost meanwhile: marked or not, the sweep sends them
    (at once, or `resend_after` after a mark that landed)."""
    try:
        sent = transport.mark_sent(plan.batch.id, call_ids)
    except StateUnavailable as error:
        log.warning("batch %s: its reads wait for the sweep: %s", plan.batch.id, error)
        return
    transport.post([plan.calls[c].message for c in sent], parallel=True)


def plan_json(plan: plans.BatchPlan) -> str:
    """`plan` as JSON, by pydantic's serializer: for 1,000 calls 2.8 ms of
    CPU and a 1.8 MB passing peak, where its dict and `json.dumps` took
    10.5 ms and 5.8 MB. A text it cannot encode in UTF-8 (a lone surrogate
    in a reason) goes through the dict, which JSON spells with escapes, as
    before."""
    try:
        return plan.model_dump_json()
    except PydanticSerializationError:
        return json.dumps(plan.model_dump(mode="json"))
