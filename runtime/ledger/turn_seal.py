"""A conversation's turns in their seals (docs/architecture.md, "Transcripts"):
when a turn's batch ends, its seal (runtime/ledger/chain.py) records its
link as it stands then, its number in the conversation and the seal of the
turn before it; and the conversation's head row records, signed, its last
sealed turn and how many there are. A turn removed at either end, or a link
re-chained, no longer agrees with what was signed."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from sqlalchemy import Connection, bindparam, select

from runtime.keyring import Purpose, derived
from runtime.ledger.dialects import insert_for
from runtime.ledger.tables import BatchRow, ConversationRow

BATCHES, HEADS = BatchRow.__table__, ConversationRow.__table__


def turn_of(connection: Connection, batch: Any) -> dict[str, Any] | None:
    """The turn a batch is of its conversation, for its seal; None outside one.
    `batch`: its batch row's columns by name, with its link (`conversation`,
    `previous_batch`, `previous_digest`)."""
    if batch is None or batch["conversation"] is None:
        return None
    before, previous = None, batch["previous_batch"]
    if previous is not None:
        before = connection.execute(_SEAL_OF, {"batch": previous}).scalar()
    before = before if isinstance(before, dict) else {}
    number = (before.get("turn") or {}).get("number") if before else None
    return {
        "conversation": batch["conversation"],
        "number": 1 if previous is None else (number + 1 if number else None),
        "previous_batch": previous,
        "previous_digest": batch["previous_digest"],
        "previous_seal": before.get("hmac"),
    }


def head_signature(key: bytes, conversation: str, turns: int, last: str) -> str:
    body = json.dumps(["head", conversation, turns, last], separators=(",", ":"))
    mac = hmac.new(derived(key, Purpose.ledger_seal), body.encode(), hashlib.sha256)
    return "hmac-sha256:" + mac.hexdigest()


def advance_head(connection: Connection, batch_id: str, turn: dict[str, Any], key: bytes) -> None:
    """The conversation's head moved to this turn, unless it is past it already."""
    if not turn.get("number"):
        return  # the turn before it had not ended: its number is not known
    conversation, number = turn["conversation"], turn["number"]
    row = {
        "id": conversation,
        "turns": number,
        "last_batch": batch_id,
        "seal": head_signature(key, conversation, number, batch_id),
    }
    statement = insert_for(connection.dialect.name)(HEADS).values(row)
    moved = {name: statement.excluded[name] for name in ("turns", "last_batch", "seal")}
    connection.execute(
        statement.on_conflict_do_update(
            index_elements=[HEADS.c.id], set_=moved, where=HEADS.c.turns < statement.excluded.turns
        )
    )


def head(connection: Connection, conversation: str) -> Any:
    return connection.execute(select(HEADS).where(HEADS.c.id == conversation)).first()


_SEAL_OF = select(BATCHES.c.seal).where(BATCHES.c.id == bindparam("batch"))
