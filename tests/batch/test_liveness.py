"""Whose worker is gone (runtime/batch/liveness.py), judged from the leases an
advance read with the rest of the state in one round trip (`BatchState.known`),
on the in-memory transport and a real SQLite ledger."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from runtime.batch import liveness
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.transport.base import Known
from runtime.worker.in_memory import memory_transport

LEASE = 6.0


@pytest.fixture
def state(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    transport = memory_transport(
        registry=registry, ledger=ledger, settings=Settings(home=tmp_path / "home"), sweep=False
    )
    yield transport
    transport.close()
    ledger.close()


def known(holds: dict[str, float]) -> Known:
    return Known(sent={}, started=set(), cancelled=False, ends={}, holds=holds)


def test_a_lapsed_lease_loses_a_claimed_call_and_stalls_a_taken_one(state):
    now, long_ago = time.time(), datetime.now(UTC) - timedelta(hours=1)
    held = known({"claimed-lapsed": now - 1, "claimed-live": now + 60, "taken-lapsed": now - 1})
    claimed = {"claimed-lapsed": long_ago, "claimed-live": long_ago}
    lost, stalled = liveness.gone(state, held, claimed, {"taken-lapsed", "taken-bare"}, LEASE)
    assert lost == {"claimed-lapsed"}
    assert stalled == {"taken-lapsed"}  # a taken call without a lease is left alone


def test_a_claim_without_a_lease_is_lost_only_once_a_lease_is_old(state):
    just_now, long_ago = datetime.now(UTC), datetime.now(UTC) - timedelta(seconds=2 * LEASE)
    claimed = {"fresh": just_now, "old": long_ago}
    lost, _ = liveness.gone(state, known({}), claimed, set(), LEASE)
    assert lost == {"old"}  # the fresh one's holder takes its lease right after the claim


def test_with_the_state_away_no_worker_counts_as_gone(state):
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    assert liveness.gone(state, None, {"c": long_ago}, {"t"}, LEASE) == (frozenset(), frozenset())
