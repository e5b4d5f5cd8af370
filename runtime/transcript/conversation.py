"""The turns of a conversation in the ledger: the link a new turn records to
the one before it, and a check of every link against the turns as the ledger
holds them now and as their seals signed them when each ended
(docs/architecture.md, "Transcripts")."""

from __future__ import annotations

import hmac
from typing import Any

from runtime.ledger.store import Ledger
from runtime.ledger.turn_seal import head_signature
from runtime.transcript.document import build
from runtime.transcript.integrity import digest


def link(ledger: Ledger, conversation: str) -> dict[str, Any]:
    """The columns of a new turn of `conversation`: its id, the batch recorded
    last in it, and that batch's transcript digest if every call of it has
    ended (an open turn's transcript is still growing: no digest to keep)."""
    found = ledger.last_turn(conversation)
    if found is None:
        return {"conversation": conversation}
    last = found.id
    document = build(ledger, last)
    ended = document is not None and document["batch"]["state"] == "ended"
    return {
        "conversation": conversation,
        "previous_batch": last,
        "previous_digest": digest(document) if ended else None,
    }


def check(
    ledger: Ledger, conversation: str, key: bytes | None = None, last: str | None = None
) -> list[str]:
    """Every link of the conversation against its turns' transcripts now: a
    turn deleted from the ledger, or changed after the next one was submitted,
    is named; empty when the chain holds. With `key`, also each turn's rows
    and seal, the links its seal signed (a turn removed at the start, a link
    re-chained) and the conversation's signed head (its last turn removed);
    `last`: the batch the caller knows to be its last turn."""
    turns = ledger.turns(conversation)
    if not turns:
        return [f"no batch of conversation {conversation!r} in the ledger"]
    digests: dict[str, str] = {}
    problems = []
    for turn in turns:
        document = build(ledger, turn.id)
        digests[turn.id] = digest(document)
        if key is not None:
            problems += _sealed(ledger, turn, turns, key)
        if turn.previous_batch is None:
            if turn is not turns[0]:
                problems.append(f"batch {turn.id}: links to no turn, yet turns came before it")
            continue
        if turn.previous_batch not in digests:
            problems.append(
                f"batch {turn.id}: the turn before it ({turn.previous_batch}) "
                "is missing from the ledger"
            )
        elif (
            turn.previous_digest is not None
            and turn.previous_digest != digests[turn.previous_batch]
        ):
            problems.append(
                f"batch {turn.id}: the turn before it ({turn.previous_batch}) "
                "was changed after this one was submitted"
            )
    if key is not None:
        problems += _head(ledger, conversation, turns, key)
    if last is not None and last not in digests:
        problems.append(f"conversation {conversation}: its last turn ({last}) is missing")
    return list(dict.fromkeys(problems))


def _sealed(ledger: Ledger, turn: Any, turns: list[Any], key: bytes) -> list[str]:
    """One turn against its seal: its rows, and the link it signed when it ended."""
    found = [f"batch {turn.id}: {p}" for p in ledger.rows_check(turn.id, key)["problems"]]
    seal = turn.seal if isinstance(turn.seal, dict) else {}
    signed = seal.get("turn")
    if not isinstance(signed, dict):
        return found  # open, or unsealed: `rows_check` said so
    here, ids = f"batch {turn.id}", {t.id: t for t in turns}
    before = signed.get("previous_batch")
    if (before, signed.get("previous_digest")) != (turn.previous_batch, turn.previous_digest):
        found.append(f"{here}: its link was re-chained after it ended (it followed {before})")
    if before is not None and before not in ids:
        found.append(f"{here}: the turn before it ({before}) is missing from the ledger")
    elif before is not None:
        earlier = ids[before].seal if isinstance(ids[before].seal, dict) else {}
        if signed.get("previous_seal") not in (None, earlier.get("hmac")):
            found.append(f"{here}: the turn before it ({before}) was sealed again")
    number = signed.get("number")
    if turn is turns[0] and number not in (None, 1):
        found.append(f"{here}: is turn {number}; the turns before it are missing from the ledger")
    return found


def _head(ledger: Ledger, conversation: str, turns: list[Any], key: bytes) -> list[str]:
    """The conversation's signed head against its turns: a last turn removed."""
    head = ledger.conversation_head(conversation)
    sealed = [
        t for t in turns if isinstance(t.seal, dict) and (t.seal.get("turn") or {}).get("number")
    ]
    if head is None:
        if sealed:
            return [f"conversation {conversation}: its head is missing; its last turn is unknown"]
        return []
    expected = head_signature(key, conversation, head.turns, head.last_batch)
    if not hmac.compare_digest(str(head.seal), expected):
        return [f"conversation {conversation}: its head is unsigned, or signed under another key"]
    if head.last_batch not in {t.id for t in turns}:
        return [
            f"conversation {conversation}: its last turn ({head.last_batch}, turn {head.turns}) "
            "is missing from the ledger"
        ]
    return []
