"""Retention on SQLite and PostgreSQL: whole batches ended before the cut-off
go, with every row of theirs; open and recent ones stay; each transcript is
written first when asked; the space comes back (docs/architecture.md, "Retention")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from runtime.ledger import retention
from runtime.ledger.approvals import Approvals
from runtime.ledger.remembered import RememberedRules
from runtime.ledger.store import Ledger
from runtime.ledger.tables import BatchRow, RememberedRuleRow, utc_now
from runtime.transcript import parse, verify
from runtime.transcript.archive import exporter, file_name
from runtime.types import Batch, Status, ToolCall, ToolResult, Usage
from tests.support.postgres import own_ledger

KEY = b"retention-test-key"
OLD = timedelta(days=40)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger(request, tmp_path):
    with own_ledger(request.param, tmp_path) as store:
        yield store


def make(ledger: Ledger, *, ended: bool = True, age: timedelta = OLD, text: str = "x") -> str:
    """A two-call batch with rows in every table a batch has; ended `age` ago,
    or left open (its second call waits for an approval)."""
    batch = Batch(
        calls=[
            ToolCall(id="a", name="echo", arguments={"text": text}),
            ToolCall(id="b", name="write"),
        ]
    )
    ledger.record_batch(
        batch,
        plan={"stages": []},
        columns={"submitter": "key:ann"},
        owner={"key_id": "k1", "key_name": "ann"},
    )
    ledger.record_event(batch.id, "a", "decision", effect="allow")
    Approvals(ledger, KEY).request(
        batch.id, "b", tool="write", arguments={}, reason="asks", timeout=60
    )
    for call_id in ("a", "b") if ended else ("a",):
        result = ToolResult(
            call_id=call_id,
            tool="echo",
            status=Status.ok,
            model_message=text,
            summary="s",
            usage=Usage(wall_ms=1.0),
        )
        ledger.record_result(batch.id, result)
    if ended:
        assert ledger.mark_ended(batch.id)
    at = utc_now() - age
    table = BatchRow.__table__
    values = {"created_at": at} | ({"ended_at": at} if ended else {})
    ledger.transaction(
        lambda c: c.execute(update(table).where(table.c.id == batch.id).values(**values)),
        core=True,
    )
    return batch.id


def rows_of(ledger: Ledger, batch_id: str) -> dict[str, int]:
    def work(connection):
        found = {}
        for table in [*retention.OF_A_BATCH]:
            query = select(func.count()).where(table.c.batch_id == batch_id)
            found[table.name] = connection.execute(query).scalar()
        batches = BatchRow.__table__
        query = select(func.count()).where(batches.c.id == batch_id)
        found[batches.name] = connection.execute(query).scalar()
        return found

    return ledger.transaction(work, write=False, core=True)


def test_only_whole_batches_ended_before_the_cutoff_go(ledger):
    old = [make(ledger) for _ in range(5)]
    recent = make(ledger, age=timedelta(days=1))
    still_open = make(ledger, ended=False)
    RememberedRules(ledger).add(
        "echo", scope="workspace", scope_value="/w", by="ann", batch_id=old[0], call_id="a"
    )
    rows = rows_of(ledger, old[0])
    assert all(rows.values()) or set(k for k, v in rows.items() if not v) == {"toolrun_plan"}
    assert rows_of(ledger, still_open)["toolrun_plan"] == 1  # an ended batch's plan is gone

    pruned = retention.prune(ledger, retention.cutoff(30), chunk=2)

    assert pruned.batches == 5
    for batch_id in old:
        assert not any(rows_of(ledger, batch_id).values())
    assert rows_of(ledger, recent)["toolrun_call"] == 2
    assert rows_of(ledger, still_open)["toolrun_call"] == 2  # open, however old: never touched
    assert ledger.record(still_open) is not None
    count = select(func.count()).select_from(RememberedRuleRow.__table__)
    rules = ledger.transaction(lambda c: c.execute(count).scalar(), write=False, core=True)
    assert rules == 1  # policy now, not the batch's
    assert retention.prune(ledger, retention.cutoff(30)).batches == 0


def test_each_transcript_is_written_before_its_batch_goes(ledger, tmp_path):
    old = [make(ledger, text=f"t{i}") for i in range(3)]
    out = tmp_path / "kept"

    pruned = retention.prune(ledger, retention.cutoff(30), export=exporter(ledger, out, KEY))

    assert (pruned.batches, pruned.exported) == (3, 3)
    for batch_id in old:
        document = parse((out / file_name(batch_id)).read_text())
        assert verify(document, KEY) == []
        assert document["batch"]["id"] == batch_id
        assert [c["id"] for c in document["calls"]] == ["a", "b"]
    assert sorted(p.name for p in out.iterdir()) == sorted(file_name(b) for b in old)


def test_a_batch_whose_transcript_cannot_be_written_stays(ledger, tmp_path):
    kept, gone = make(ledger), make(ledger)

    def export(batch_id: str) -> None:
        if batch_id == kept:
            raise PermissionError("read-only disk")

    pruned = retention.prune(ledger, retention.cutoff(30), export=export)

    assert (pruned.batches, pruned.failed_exports) == (1, 1)
    assert rows_of(ledger, kept)["toolrun_call"] == 2
    assert rows_of(ledger, gone)["toolrun_call"] == 0


def test_the_space_comes_back(ledger):
    for _ in range(60):
        make(ledger, text="y" * 20_000)
    grown = retention.size(ledger)

    pruned = retention.prune(ledger, retention.cutoff(30))

    assert pruned.batches == 60
    if ledger.dialect == "sqlite":
        assert pruned.reclaimed.startswith("incremental vacuum")
        assert retention.size(ledger) < grown / 2
    else:
        assert pruned.reclaimed.startswith("VACUUM")


def test_an_older_sqlite_file_is_rewritten_only_when_asked(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE elsewhere (x)")  # a file made before: auto-vacuum stays off
    old.close()
    ledger = Ledger(f"sqlite:///{path}")
    try:
        for _ in range(30):
            make(ledger, text="z" * 20_000)
        grown = retention.size(ledger)
        assert retention.prune(ledger, retention.cutoff(30)).reclaimed.startswith("freed pages")
        assert retention.size(ledger) == grown
        make(ledger)
        pruned = retention.prune(ledger, retention.cutoff(30), full_vacuum=True)
        assert pruned.reclaimed.startswith("VACUUM")
        assert retention.size(ledger) < grown / 2
        auto = ledger.outside_transaction(lambda raw: raw.execute("PRAGMA auto_vacuum").fetchone())
        assert auto[0] == 2  # incremental from now on
    finally:
        ledger.close()
