"""A transcript's seal: the SHA-256 of its canonical JSON (sorted keys, no
spaces, UTF-8) without the seal itself, and an HMAC-SHA256 of that JSON under
the transcripts' own key, derived from the signing key (`runtime.keyring`);
and how a transcript, or the turns of a conversation, are checked
(docs/architecture.md, "Transcripts")."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from runtime.keyring import Purpose, derived

ALGORITHM = "sha256"
# Fail closed: the signing key itself also signed task messages, so such an
# HMAC cannot tell a transcript from a message (docs/architecture.md, "Secrets").
LEGACY = (
    "the HMAC is under the signing key itself, as toolrun sealed transcripts before it "
    "derived a key per purpose, and cannot tell a transcript from a signed task message; "
    "export it again from the ledger (toolrun transcript BATCH_ID) to seal it anew"
)


def canonical(document: dict[str, Any]) -> bytes:
    body = {name: value for name, value in document.items() if name != "integrity"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(document: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical(document)).hexdigest()


def _mac(document: dict[str, Any], key: bytes, rows: Any = None) -> str:
    """Under the transcripts' own key, derived from the signing key `key`;
    `rows`, the ledger's check of the batch's rows at export, signed with it."""
    return _under(derived(key, Purpose.transcript), document, rows)


def _under(key: bytes, document: dict[str, Any], rows: Any = None) -> str:
    text = canonical(document)
    if rows is not None:
        text += b"\n" + json.dumps(rows, sort_keys=True, separators=(",", ":")).encode()
    return "hmac-sha256:" + hmac.new(key, text, hashlib.sha256).hexdigest()


def seal(
    document: dict[str, Any], key: bytes, rows: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The document with its `integrity` (any earlier one replaced). `rows`:
    what the ledger found of the batch's rows against their hashes and the
    seal signed when the batch ended (`runtime/ledger/chain.py`), which
    `verify` reports."""
    body = {name: value for name, value in document.items() if name != "integrity"}
    found = {"algorithm": ALGORITHM, "digest": digest(body), "hmac": _mac(body, key, rows)}
    return body | {"integrity": found | ({"rows": rows} if rows is not None else {})}


def verify(document: Any, key: bytes | None) -> list[str]:
    """What is wrong with a sealed transcript; empty when nothing is. Without
    `key` the HMAC is not checked (and that is said)."""
    if not isinstance(document, dict) or not isinstance(document.get("integrity"), dict):
        return ["no integrity section: not a sealed toolrun transcript"]
    seal_ = document["integrity"]
    rows = seal_.get("rows")
    problems = []
    if seal_.get("digest") != digest(document):
        problems.append("the digest does not match the content: the transcript was changed")
    if key is None:
        problems.append("no signing key: the HMAC was not checked")
    elif not hmac.compare_digest(str(seal_.get("hmac", "")), _mac(document, key, rows)):
        if hmac.compare_digest(str(seal_.get("hmac", "")), _under(key, document, rows)):
            problems.append(LEGACY)
        else:
            problems.append("the HMAC does not match: changed, or sealed under another key")
    return problems + _rows(rows)


def _rows(rows: Any) -> list[str]:
    """What the ledger found of the rows when the transcript was exported:
    each row changed since it was written, or since the batch ended, by call."""
    if rows is None:
        return []
    if not isinstance(rows, dict) or not isinstance(rows.get("problems"), list):
        return ["the ledger's check of the rows is not readable"]
    return [f"the ledger's rows: {problem}" for problem in rows["problems"]]


def links(documents: list[dict[str, Any]]) -> list[str]:
    """What is wrong with the links between transcripts of conversations: each
    turn's `previous` names the batch and digest of the turn before it, so a
    turn removed (its successor names a batch not given) or edited (its digest
    is not what its successor recorded) shows. The first turn given may link
    to one not given only if it is the conversation's first turn."""
    problems: list[str] = []
    documents = [d for d in documents if _linkable(d)]
    by_batch = {d["batch"]["id"]: d for d in documents}
    conversations: dict[str, list[dict[str, Any]]] = {}
    for document in documents:
        if document.get("conversation"):
            conversations.setdefault(document["conversation"]["id"], []).append(document)
    for name, turns in conversations.items():
        for turn in turns:
            link = turn["conversation"]["previous"]
            here = f"conversation {name}, batch {turn['batch']['id']}"
            if link is None:
                continue
            before = by_batch.get(link["batch_id"])
            if before is None:
                number = _number(turn)
                if turn is not _first(turns) or number not in (None, 1):
                    problems.append(f"{here}: the turn before it ({link['batch_id']}) is missing")
            elif link["digest"] is None:
                problems.append(f"{here}: the turn before it had not ended; its link has no digest")
            elif link["digest"] != digest(before):
                problems.append(
                    f"{here}: the turn before it ({link['batch_id']}) is not the one it followed"
                )
    return problems


def _number(document: dict[str, Any]) -> Any:
    """The turn's number as its ledger seal signed it (`integrity.rows.turn`),
    which the export's HMAC covers: a first turn left out of the files given
    leaves the next one's number above 1."""
    rows = (document.get("integrity") or {}).get("rows")
    return rows.get("turn") if isinstance(rows, dict) else None


def _first(turns: list[dict[str, Any]]) -> dict[str, Any]:
    return min(turns, key=lambda t: (t["batch"]["created_at"] or "", t["batch"]["id"]))


def _linkable(document: Any) -> bool:
    """Whether the parts `links` reads have their schema's shape (a file that
    is no transcript is `verify`'s to report, not a crash of `links`)."""
    if not isinstance(document, dict) or not isinstance(document.get("batch"), dict):
        return False
    batch, conversation = document["batch"], document.get("conversation")
    if not isinstance(batch.get("id"), str) or not isinstance(batch.get("created_at"), str | None):
        return False
    if conversation is None:
        return True
    if not isinstance(conversation, dict) or not isinstance(conversation.get("id"), str):
        return False
    link = conversation.get("previous")
    return link is None or (
        isinstance(link, dict)
        and isinstance(link.get("batch_id"), str)
        and isinstance(link.get("digest"), str | None)
    )
