"""The turns of a conversation in the ledger: the link a new turn records to
the one before it, and a check of every link against the turns as the ledger
holds them now (docs/architecture.md, "Transcripts")."""

from __future__ import annotations

from typing import Any

from runtime.ledger.store import Ledger
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


def check(ledger: Ledger, conversation: str) -> list[str]:
    """Every link of the conversation against its turns' transcripts now: a
    turn deleted from the ledger, or changed after the next one was submitted,
    is named; empty when the chain holds."""
    turns = ledger.turns(conversation)
    if not turns:
        return [f"no batch of conversation {conversation!r} in the ledger"]
    digests: dict[str, str] = {}
    problems = []
    for turn in turns:
        document = build(ledger, turn.id)
        digests[turn.id] = digest(document)
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
    return problems
