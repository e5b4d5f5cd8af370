"""The approvals page's session tokens (runtime/gateway/page/session.py):
signed under a key of their own, refused when forged, changed or expired."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from runtime.gateway.page import session
from runtime.keyring import Purpose, derived

KEY = secrets.token_bytes(32)


def test_a_session_reads_back_under_its_key_only():
    token = session.issue(KEY, "abcdef012345")
    found = session.read(KEY, token)
    assert found is not None and found.key_id == "abcdef012345" and found.nonce
    assert session.read(secrets.token_bytes(32), token) is None


def test_a_changed_forged_or_expired_token_is_no_session():
    token = session.issue(KEY, "abcdef012345")
    key_id, expires, nonce, signature = token.split(".")
    assert session.read(KEY, f"000000000000.{expires}.{nonce}.{signature}") is None
    assert session.read(KEY, f"{key_id}.{int(expires) + 9999}.{nonce}.{signature}") is None
    assert session.read(KEY, "") is None and session.read(KEY, None) is None
    assert session.read(KEY, "a.b.c") is None
    # Signed with the approval key (another purpose's), it is not a session.
    payload = f"{key_id}.{expires}.{nonce}"
    other = hmac.new(derived(KEY, Purpose.approval), payload.encode(), hashlib.sha256)
    assert session.read(KEY, f"{payload}.{other.hexdigest()}") is None
    assert session.read(KEY, session.issue(KEY, key_id, lifetime=-1)) is None


def test_the_token_carries_no_secret_of_the_key():
    token = session.issue(KEY, "abcdef012345")
    assert KEY.hex() not in token and derived(KEY, Purpose.page_session).hex() not in token
