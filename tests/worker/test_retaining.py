"""Retention in the sweep: with a period set, the sweeping worker removes what
is due, a bounded number of chunks at a time and not more often than it
should; without one, it removes nothing (docs/architecture.md, "Retention")."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest

from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.transcript.archive import file_name
from runtime.worker.retaining import Retaining
from tests.conftest import embedded_stack
from tests.ledger.test_retention import make
from tests.support.postgres import own_ledger
from tests.support.waiting import wait_for


def test_the_sweep_prunes_in_bounded_steps_and_exports_first(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    old = [make(ledger) for _ in range(3)]
    kept = tmp_path / "kept"
    settings = Settings(home=tmp_path, retention_days=30, retention_export=kept)
    retaining = Retaining(settings, ledger, b"sweep-key")
    retaining.chunks, retaining.chunk = 1, 2

    first = retaining.offer()
    assert first is not None and first.batches == 2  # one chunk of two
    assert retaining.offer() is None  # not again before `every` seconds
    retaining.every, retaining._next = 0.0, 0.0
    assert retaining.offer().batches == 1
    assert sorted(p.name for p in kept.iterdir()) == sorted(file_name(b) for b in old)
    assert all(ledger.record(b) is None for b in old)
    ledger.close()


def test_without_a_period_nothing_goes(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    batch = make(ledger)
    assert Retaining(Settings(home=tmp_path), ledger, b"k").offer() is None
    assert ledger.record(batch) is not None
    ledger.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def either(request, tmp_path):
    """A ledger of the test's own, on SQLite and on PostgreSQL."""
    with own_ledger(request.param, tmp_path) as store:
        yield store


def org_file(tmp_path, kept) -> Path:
    path = tmp_path / "org.json"
    path.write_text(json.dumps({"retention": {"days": 30, "export": str(kept)}}))
    return path


def test_the_org_files_period_wins_over_the_deployments_and_the_sweep_says_so_once(
    either, tmp_path, caplog
):
    ledger = either
    old, recent, open_ = (
        make(ledger),
        make(ledger, age=timedelta(days=2)),
        make(ledger, ended=False),
    )
    kept = tmp_path / "kept"
    settings = Settings(home=tmp_path, policy_file=org_file(tmp_path, kept), retention_days=1000)
    retaining = Retaining(settings, ledger, b"sweep-key")

    with caplog.at_level(logging.INFO, logger="toolrun.worker"):
        assert retaining.offer().batches == 1
        retaining._next = 0.0
        assert retaining.offer().batches == 0
    assert [p.name for p in kept.iterdir()] == [file_name(old)]
    assert ledger.record(old) is None
    assert ledger.record(recent) is not None and ledger.record(open_) is not None
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retention:")]
    assert f"kept 30 day(s) (from {settings.policy_file}), then exported to {kept}" in said[0]
    assert sum("wins over TOOLRUN_RETENTION_DAYS=1000.0" in line for line in said) == 1


@pytest.mark.server
def test_a_real_workers_sweep_keeps_to_the_org_files_period(tmp_path):
    home, kept = tmp_path / "home", tmp_path / "kept"
    ledger = Ledger(Settings(home=home).ledger_url)
    old, open_ = make(ledger), make(ledger, ended=False)
    policy = org_file(tmp_path, kept)
    with embedded_stack(home, policy_file=policy, retention_days=1000):
        wait_for(lambda: ledger.record(old) is None, 60, "the sweep to remove the old batch")
        assert [p.name for p in kept.iterdir()] == [file_name(old)]
        assert ledger.record(open_) is not None
        logs = "".join(p.read_text() for p in (home / "logs").glob("*.log"))
        assert "wins over TOOLRUN_RETENTION_DAYS=1000.0" in logs
    ledger.close()
