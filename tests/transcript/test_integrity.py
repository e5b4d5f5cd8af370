"""A transcript's seal under the transcripts' own key (runtime/transcript/integrity.py)."""

from __future__ import annotations

import hashlib
import hmac

from runtime.transcript import integrity
from runtime.transport import signing

KEY = b"k" * 32
DOCUMENT = {"schema": "toolrun.transcript/1", "batch": {"id": "b", "created_at": None}}


def test_a_seal_verifies_under_its_key_only():
    sealed = integrity.seal(DOCUMENT, KEY)
    assert integrity.verify(sealed, KEY) == []
    assert integrity.verify(sealed, b"another") == [
        "the HMAC does not match: changed, or sealed under another key"
    ]


def test_a_seal_made_under_the_signing_key_itself_fails_closed_and_says_why():
    """How toolrun sealed before it derived a key per purpose: the same key
    signed task messages, so such a seal proves nothing about a transcript."""
    mac = hmac.new(KEY, integrity.canonical(DOCUMENT), hashlib.sha256).hexdigest()
    older = integrity.seal(DOCUMENT, KEY)
    older["integrity"]["hmac"] = f"hmac-sha256:{mac}"
    assert integrity.verify(older, KEY) == [integrity.LEGACY]


def test_a_task_message_signature_over_the_same_bytes_is_no_seal():
    body = {"batch_id": "b", "call_id": "c", "tool": "echo", "arguments": {}}
    forged = body | {
        "integrity": {
            "algorithm": "sha256",
            "digest": integrity.digest(body),
            "hmac": "hmac-sha256:" + signing.sign(body, KEY),
        }
    }
    assert integrity.verify(forged, KEY) == [
        "the HMAC does not match: changed, or sealed under another key"
    ]
    sealed = integrity.seal(body, KEY)
    mac = sealed["integrity"]["hmac"].removeprefix("hmac-sha256:")
    assert not signing.verify(body | {signing.FIELD: mac}, KEY)
