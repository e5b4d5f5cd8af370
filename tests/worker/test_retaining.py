"""Retention in the sweep: with a period set, the sweeping worker removes what
is due, a bounded number of chunks at a time and not more often than it
should; without one, it removes nothing (docs/architecture.md, "Retention")."""

from __future__ import annotations

from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.transcript.archive import file_name
from runtime.worker.retaining import Retaining
from tests.ledger.test_retention import make


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
