"""Whose worker is gone (runtime/batch/liveness.py), judged from the leases an
advance read with the rest of the state in one round trip (`BatchState.known`),
on the in-memory transport and a real SQLite ledger."""

from __future__ import annotations

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
    held = known({"claimed-lapsed": -1.0, "claimed-live": 60.0, "taken-lapsed": 0.0})
    claimed = ["claimed-lapsed", "claimed-live"]
    lost, stalled = liveness.gone(state, "b", held, claimed, {"taken-lapsed", "taken-bare"}, LEASE)
    assert lost == {"claimed-lapsed"}
    assert stalled == {"taken-lapsed"}  # a taken call without a lease is left alone


def test_a_claim_without_a_lease_is_lost_only_once_it_has_had_none_for_a_lease(state):
    lost, _ = liveness.gone(state, "b", known({}), ["bare"], set(), LEASE)
    assert lost == set()  # its holder takes its lease right after the claim
    lost, _ = liveness.gone(state, "b", known({}), ["bare", "new"], set(), LEASE)
    assert lost == set()
    # Judged with a lease of no time: each has had none for that long by now.
    lost, _ = liveness.gone(state, "b", known({}), ["bare", "new"], set(), 0.0)
    assert lost == {"bare", "new"}


def test_with_the_state_away_no_worker_counts_as_gone(state):
    assert liveness.gone(state, "b", None, ["c"], {"t"}, 0.0) == (frozenset(), frozenset())
