"""Bearer tokens remembered for a second (runtime/gateway/auth.py): a token
that found its key live authenticates again without a read, a wrong one
never does, and past `RECHECK` the ledger is asked again, so a revoked key
is refused. Real SQLite ledger."""

from __future__ import annotations

import pytest

from runtime.gateway import auth
from runtime.gateway.auth import Standing
from runtime.gateway.keys import Role, authenticate, mint
from runtime.ledger.keys import Keys
from runtime.ledger.store import Ledger


@pytest.fixture
def keys(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    yield Keys(ledger)
    ledger.close()


def test_a_token_seen_live_is_known_for_a_second_only(keys, monkeypatch):
    token = mint(keys, "erin", Role.admin)
    standing = Standing(keys)
    assert standing.known(token) is None  # never authenticated here
    key = authenticate(keys, token)
    standing.found(token, key)
    assert standing.known(token) == key
    assert standing.known(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert keys.revoke("erin")
    monkeypatch.setattr(auth, "RECHECK", 0.0)  # the second has passed
    assert standing.known(token) is None
    assert authenticate(keys, token) is None
