"""A batch's rows fixed as they are written (docs/architecture.md,
"Transcripts"): every event and end row carries the HMAC of its own columns
under the ledger seal's key (`chain`), made by the process that writes it,
in the transaction that inserts it (`stamped`); when the batch ends,
the transaction that marks it ended folds each call's row hashes, in the
order they were written, into one hash per call and signs those (the
ledger's seal, under the key of `Purpose.ledger_seal`) on the batch row. An
export checks the rows against both: a row changed since it was written, or
rows added, removed or re-hashed since the end, name their call.

Each call's rows are folded at the end rather than chained row to row as
they land: one call's rows are written by several processes (a read's
worker may end it before its client records the batch, a buffer replays
rows late), so a row-to-row chain would need a read and a lock on every
event; the end's transaction holds the batch's lock already."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from runtime.keyring import Purpose, derived
from runtime.ledger import turn_seal
from runtime.ledger.prepared import Prepared
from runtime.ledger.tables import BatchRow, CallRow, EndRow, EventRow

SEAL_KEY = "toolrun.seal_key"  # where a connection carries the signing key (`Database`)
EVENT_COLUMNS = (
    "batch_id", "call_id", "kind", "at", "mode", "risk", "effect", "rule", "source",
    "reason", "policy_version", "approver", "worker", "attempt", "status", "detail",
)  # fmt: skip
END_COLUMNS = ("batch_id", "call_id", "status", "result", "at")
HEAD_COLUMNS = ("call_id", "position", "tool", "kind", "risk", "arguments")
# What the batch row tells its transcript and keeps from submit on (not its
# end, cancel or seal, which come later).
BATCH_COLUMNS = (
    "id", "mode", "workspace", "on_error", "call_count", "policy_version", "created_at",
    "key", "submitter", "format", "policy_files", "stages", "conversation",
    "previous_batch", "previous_digest", "deadline_at", "model", "input_tokens",
    "output_tokens",
)  # fmt: skip
EVENTS, ENDS, CALLS = EventRow.__table__, EndRow.__table__, CallRow.__table__
BATCHES = BatchRow.__table__


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC).isoformat()
    return value


def row_hash(row: Any, columns: tuple[str, ...], key: bytes | None = None) -> str:
    """The hash of a row's columns (a dict, or a row read back): with the
    signing `key`, an HMAC under the ledger seal's key, which no one without
    it makes again for a changed row; else a plain SHA-256."""
    get = row.get if isinstance(row, dict) else lambda name: getattr(row, name)
    body = {name: _plain(get(name)) for name in columns}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    data = text.encode("utf-8", "surrogatepass")
    if key is None:
        return hashlib.sha256(data).hexdigest()
    mac = hmac.new(derived(key, Purpose.ledger_seal), b"row\n" + data, hashlib.sha256)
    return "hmac-sha256:" + mac.hexdigest()


def event_hash(row: Any, key: bytes | None = None) -> str:
    return row_hash(row, EVENT_COLUMNS, key)


def end_hash(row: Any, key: bytes | None = None) -> str:
    return row_hash(row, END_COLUMNS, key)


def stamped(
    connection: Connection, rows: list[dict[str, Any]], hashed: Any
) -> list[dict[str, Any]]:
    """`rows`, each with its hash as written (`hashed`: `event_hash` or
    `end_hash`), under the key this connection's ledger holds."""
    key = connection.info.get(SEAL_KEY)
    for row in rows:
        row["chain"] = hashed(row, key)
    return rows


def fold(head: str, hashes: list[str | None]) -> str:
    """One call's hash: its call row's head, then its rows' hashes in order."""
    found = hashlib.sha256(head.encode())
    for one in hashes:
        found.update(b"\n" + (one or "-").encode())
    return "sha256:" + found.hexdigest()


def signature(key: bytes, batch_id: str, seal: dict[str, Any]) -> str:
    """The seal's HMAC over its batch row's hash, its calls' and its turn."""
    calls = seal.get("calls") if isinstance(seal.get("calls"), dict) else {}
    signed = [batch_id, seal.get("batch"), sorted(calls.items()), seal.get("turn")]
    body = json.dumps(signed, sort_keys=True, separators=(",", ":"), default=str)
    mac = hmac.new(derived(key, Purpose.ledger_seal), body.encode(), hashlib.sha256)
    return "hmac-sha256:" + mac.hexdigest()


def stored_rows(connection: Connection, batch_id: str) -> tuple[list, list, list]:
    """The batch's call rows, events of calls (in the order written) and ends."""
    key = {"batch": batch_id}
    return (
        list(connection.execute(_HEADS, key)),
        list(connection.execute(_EVENTS, key)),
        list(connection.execute(_ENDS, key)),
    )


def call_hashes(heads: list, events: list, ends: list, *, stored: bool = True) -> dict[str, str]:
    """Each call's hash from its rows: `stored`, their `chain` columns (what
    was written); else their columns now."""
    of_call: dict[str, list[str | None]] = {h.call_id: [] for h in heads}
    for event in events:
        of_call.setdefault(event.call_id, []).append(event.chain if stored else event_hash(event))
    for end in ends:
        of_call.setdefault(end.call_id, []).append(end.chain if stored else end_hash(end))
    heads_by = {h.call_id: row_hash(h, HEAD_COLUMNS) for h in heads}
    return {c: fold(heads_by.get(c, "-"), hashes) for c, hashes in of_call.items()}


def seal_ended(connection: Connection, batch_id: str) -> None:
    """Sign and store the batch's seal, in the transaction that marks it
    ended; a process without the signing key stores its hashes unsigned
    (which every check then reports). It runs on a read's way to its
    caller (the end that closes a batch seals it before the result is
    published), so its rows are read on the driver's cursor (`Prepared`,
    converted as SQLAlchemy converts them) and its turn is taken from the
    batch row already read."""
    key, values = connection.info.get(SEAL_KEY), {"batch": batch_id}
    found = _SEALED_HEAD.first(connection, values)
    head = None if found is None else dict(zip(BATCH_COLUMNS, found, strict=True))
    heads = [dict(zip(HEAD_COLUMNS, h, strict=True)) for h in _SEALED_HEADS.all(connection, values)]
    hashes: dict[str, list[str | None]] = {h["call_id"]: [] for h in heads}
    for call_id, stored in [
        *_STORED_EVENTS.all(connection, values),
        *_STORED_ENDS.all(connection, values),
    ]:
        hashes.setdefault(call_id, []).append(stored)
    heads_by = {h["call_id"]: row_hash(h, HEAD_COLUMNS) for h in heads}
    calls = {c: fold(heads_by.get(c, "-"), rows) for c, rows in hashes.items()}
    turn = turn_seal.turn_of(connection, head)
    seal = {"batch": row_hash(head, BATCH_COLUMNS), "calls": calls, "turn": turn}
    seal["hmac"] = signature(key, batch_id, seal) if key else None
    _SEAL.execute(connection, {"batch": batch_id, "seal": seal})
    if turn is not None and key:
        turn_seal.advance_head(connection, batch_id, turn, key)


def problems(connection: Connection, batch_id: str, key: bytes | None) -> dict[str, Any]:
    """The rows of a batch against their hashes and its seal: `sealed` (ended
    and sealed), `problems`, each naming the call whose rows changed, and
    `turn`, its number in its conversation as its seal signed it."""
    row = connection.execute(_BATCH, {"batch": batch_id}).first()
    if row is None:
        return {"sealed": False, "problems": []}
    heads, events, ends = stored_rows(connection, batch_id)
    found = []
    for kind, rows, hashed in (("event", events, event_hash), ("end", ends, end_hash)):
        for one in rows:
            if one.chain is None:
                found.append(f"call {one.call_id}: its {kind} row has no hash as written")
            elif not hmac.compare_digest(one.chain.encode(), hashed(one, key).encode()):
                what = f"{kind} row ({one.kind})" if kind == "event" else f"end row ({one.status})"
                found.append(f"call {one.call_id}: its {what} changed after it was written")
    seal = row.seal
    if row.ended_at is None:
        return {"sealed": False, "problems": found}
    if not isinstance(seal, dict) or not isinstance(seal.get("calls"), dict):
        return {"sealed": False, "problems": [*found, _UNSEALED]}
    sealed_calls = {str(k): str(v) for k, v in seal["calls"].items()}
    turn = seal.get("turn")
    if key is None or not hmac.compare_digest(
        str(seal.get("hmac")).encode(), signature(key, batch_id, seal).encode()
    ):
        found.append(f"batch {batch_id}: its seal is unsigned, or signed under another key")
    head = connection.execute(_HEAD, {"batch": batch_id}).first()
    if seal.get("batch") != row_hash(head, BATCH_COLUMNS):
        found.append(f"batch {batch_id}: its batch row changed after the batch ended")
    now = call_hashes(heads, events, ends, stored=True)
    for call_id in sorted(now.keys() | sealed_calls.keys()):
        if now.get(call_id) != sealed_calls.get(call_id):
            found.append(f"call {call_id}: its rows changed after the batch ended")
    number = turn.get("number") if isinstance(turn, dict) else None
    return {"sealed": True, "problems": found} | ({"turn": number} if number else {})


_UNSEALED = (
    "the batch ended without a seal (ended before toolrun sealed batches): "
    "its rows cannot be shown unchanged since"
)
_HEADS = (
    select(*(CALLS.c[n] for n in HEAD_COLUMNS))
    .where(CALLS.c.batch_id == bindparam("batch"))
    .order_by(CALLS.c.position)
)
_EVENTS = (
    select(EVENTS.c.id, EVENTS.c.chain, *(EVENTS.c[n] for n in EVENT_COLUMNS))
    .where(EVENTS.c.batch_id == bindparam("batch"), EVENTS.c.call_id.is_not(None))
    .order_by(EVENTS.c.id)
)
_ENDS = (
    select(ENDS.c.chain, *(ENDS.c[n] for n in END_COLUMNS))
    .where(ENDS.c.batch_id == bindparam("batch"))
    .order_by(ENDS.c.call_id)
)
_HEAD = select(*(BATCHES.c[n] for n in BATCH_COLUMNS)).where(BATCHES.c.id == bindparam("batch"))
_BATCH = select(BATCHES.c.ended_at, BATCHES.c.seal).where(BATCHES.c.id == bindparam("batch"))
_SEALED_HEAD, _SEALED_HEADS = Prepared(_HEAD, rows=True), Prepared(_HEADS, rows=True)
# What the seal folds, as `call_hashes` does with `stored`: the hashes as written,
# events in the order written, then ends by call (text columns: the driver's own).
_STORED_EVENTS = Prepared(
    select(EVENTS.c.call_id, EVENTS.c.chain)
    .where(EVENTS.c.batch_id == bindparam("batch"), EVENTS.c.call_id.is_not(None))
    .order_by(EVENTS.c.id),
    rows=True,
)
_STORED_ENDS = Prepared(
    select(ENDS.c.call_id, ENDS.c.chain)
    .where(ENDS.c.batch_id == bindparam("batch"))
    .order_by(ENDS.c.call_id),
    rows=True,
)
_SEAL = Prepared(
    update(BATCHES).where(BATCHES.c.id == bindparam("batch")).values(seal=bindparam("seal"))
)
