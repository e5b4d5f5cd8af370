"""Minting and checking gateway keys on a real SQLite ledger: only a digest is
stored, and a wrong, malformed or revoked token finds no key."""

from __future__ import annotations

import contextlib

import pytest

from runtime.errors import ConfigurationError
from runtime.gateway.keys import Role, authenticate, mint
from runtime.ledger.keys import Keys
from runtime.ledger.store import Ledger
from runtime.types import Mode
from tests.conftest import postgres_url
from tests.support.postgres import fresh_database


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def keys(request, tmp_path):
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path / 'ledger.db'}"
        else:
            if not postgres_url():
                pytest.skip("TOOLRUN_TEST_POSTGRES_URL not set: PostgreSQL key tests skipped")
            url = stack.enter_context(fresh_database(postgres_url()))
        ledger = Ledger(url)
        stack.callback(ledger.close)
        yield Keys(ledger)


def test_a_token_finds_its_key_and_only_its_digest_is_stored(keys, tmp_path):
    token = mint(keys, "alice", Role.submitter, roots=[str(tmp_path)], max_mode=Mode.auto)
    key = authenticate(keys, token)
    assert (key.name, key.role, key.roots, key.max_mode) == (
        "alice",
        Role.submitter,
        (str(tmp_path.resolve()),),
        Mode.auto,
    )
    [row] = keys.all()
    assert token not in repr(row.model_dump())
    assert row.secret_hash != token


def test_wrong_malformed_and_revoked_tokens_find_nothing(keys):
    token = mint(keys, "root", Role.admin)
    prefix, secret = token.rsplit("_", 1)
    for wrong in (
        "",
        "trk_",
        "Bearer x",
        f"{prefix}_{secret[:-1]}x",
        f"{prefix}x_{secret}",
        token + "x",
        "trk_" + "0" * 12 + "_" + secret,
    ):
        assert authenticate(keys, wrong) is None, wrong
    assert keys.revoke("root")
    assert authenticate(keys, token) is None
    assert not keys.revoke("root")


def test_names_are_unique_and_submitters_need_roots(keys, tmp_path):
    mint(keys, "bob", Role.approver)
    with pytest.raises(ConfigurationError, match="exists already"):
        mint(keys, "bob", Role.admin)
    with pytest.raises(ConfigurationError, match="workspace-root"):
        mint(keys, "carol", Role.submitter)
    with pytest.raises(ConfigurationError, match="printable"):
        mint(keys, "bad\nname", Role.admin)
    for root in ("", ".", "relative/dir"):
        with pytest.raises(ConfigurationError, match="absolute"):
            mint(keys, "dave", Role.submitter, roots=[str(tmp_path), root])


def test_a_batch_keeps_its_first_owner(keys):
    keys.own("b1", key_id="k1", key_name="alice", format="anthropic")
    keys.own("b1", key_id="k2", key_name="mallory", format=None)
    assert keys.owner("b1").key_name == "alice"
    assert keys.owned("k1", ["b1", "b2"]) == {"b1"}
    assert keys.owner("b2") is None


def test_a_batch_has_one_owner_whichever_process_reads_it(keys):
    keys.own("b-1", key_id="k1", key_name="alice", format="anthropic")
    keys.own("b-1", key_id="k2", key_name="bob", format=None)  # the first record stands
    again = Keys(keys.ledger)  # another process: reads the ledger
    for reader in (keys, again, again):
        found = reader.owner("b-1")
        assert (found.key_id, found.key_name, found.format) == ("k1", "alice", "anthropic")
    assert keys.owner("b-2") is None and again.owner("b-2") is None
