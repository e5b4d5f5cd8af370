"""The client's rows of a batch on a real SQLite ledger: the batch, its calls
and every decision in one transaction before anything runs; when the ledger is
down, `buffered` (the batch fails closed) and the rows wait in its buffer; a
batch recorded before (a submit key's, by a racing submitter) gets none of them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from runtime.client.audit import BatchAudit, Recording
from runtime.gate.admission import admit
from runtime.ledger.batch_record import BatchRecord
from runtime.ledger.keys import Keys
from runtime.ledger.rows import event_fields
from runtime.ledger.store import EventKind, Ledger, Recorded
from runtime.redaction import BUILT_IN, redactor_for
from runtime.results import endings
from runtime.tools.loading import load_tools
from runtime.types import Batch, Mode, ToolCall
from tests.support.faults import locked_sqlite
from tests.support.messages import policy

REGISTRY = load_tools(["tests.support.tools"], mcp_servers_file=None)


@pytest.fixture
def ledger(tmp_path):
    # One quick attempt: a locked SQLite is "unavailable" at once, not after 10 s of retries.
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", retry_seconds=0.1, retry_attempts=1)
    yield ledger
    ledger.close()


@pytest.fixture
def audited(tmp_path):
    """A batch of a read, a write allowed by a rule, an unknown tool and a
    denied destructive call, admitted as the client admits them."""
    calls = [
        ToolCall(id="r", name="nap", arguments={"label": "a"}),
        ToolCall(id="w", name="bump", arguments={"label": "b"}),
        ToolCall(id="u", name="nope", arguments={}),
        ToolCall(id="d", name="obliterate", arguments={"label": "c"}),
    ]
    batch = Batch(calls=calls, mode=Mode.auto, workspace=str(tmp_path))
    rules = policy(tmp_path, allow=["bump"])
    admissions = [
        admit(call, registry=REGISTRY, mode=batch.mode, workspace=tmp_path, policy=rules)
        for call in calls
    ]
    return batch, rules, admissions


def commits_during(work) -> int:
    seen = []
    listener = lambda connection: seen.append(connection)  # noqa: E731
    event.listen(Engine, "commit", listener)
    try:
        work()
    finally:
        event.remove(Engine, "commit", listener)
    return len(seen)


def test_the_batch_its_calls_and_every_decision_land_in_one_transaction(ledger, audited):
    batch, rules, admissions = audited
    audit = BatchAudit(ledger, batch, rules)
    assert commits_during(lambda: audit.admissions(admissions)) == 1
    assert ledger.batch(batch.id).policy_version == rules.version
    calls = {row.call_id: row for row in ledger.calls(batch.id)}
    assert {k: (c.status, c.risk) for k, c in calls.items()} == {
        "r": ("pending", "read"),
        "w": ("pending", "write"),
        "u": ("unknown_tool", None),
        "d": ("denied", "destructive"),
    }
    rows = {(e.call_id, e.kind): e for e in ledger.events(batch.id)}
    allowed = rows["w", EventKind.decision]
    assert (allowed.effect, allowed.rule, allowed.mode, allowed.policy_version) == (
        "allow",
        "bump",
        "auto",
        rules.version,
    )
    assert rows["d", EventKind.decision].effect == "deny"  # a refusal's end carries its decision
    assert ("u", EventKind.lookup_failed) in rows


def test_an_unavailable_ledger_is_buffered_and_the_rows_wait(ledger, audited, tmp_path):
    batch, rules, admissions = audited
    audit = BatchAudit(ledger, batch, rules)
    columns = {"key": "k", "fingerprint": "f", "deadline_at": datetime.now(UTC)}
    with locked_sqlite(f"sqlite:///{tmp_path / 'ledger.db'}"):
        assert audit.admissions(admissions, plan={"p": 1}, columns=columns) is Recording.buffered
        audit.keep(audit.closing([endings.ledger_unavailable("w", "bump")]))
        assert len(ledger._buffer) == 1
    assert ledger.batch(batch.id) is None
    assert ledger._buffer.flush()  # what the buffer's thread does once the ledger is back
    assert len(ledger.calls(batch.id)) == 4
    row = ledger.batch(batch.id)  # the batch as submitted: its key, deadline and plan
    assert (row.key, row.fingerprint, row.deadline_at) == ("k", "f", columns["deadline_at"])
    assert ledger.plan(batch.id) == {"p": 1}
    assert ledger.ends(batch.id)["w"].error.kind == "ledger"  # with the batch's rows


def test_a_kept_record_lands_from_another_process_as_the_batch_was_submitted(
    ledger, audited, tmp_path
):
    """The record the cluster keeps (its JSON) writes the same rows from a
    ledger of another process, so a submitter that died takes nothing with it."""
    batch, rules, admissions = audited
    audit = BatchAudit(ledger, batch, rules)
    columns = {"key": "k", "fingerprint": "f", "deadline_at": datetime.now(UTC)}
    with locked_sqlite(f"sqlite:///{tmp_path / 'ledger.db'}"):
        assert audit.admissions(admissions, plan={"p": 1}, columns=columns) is Recording.buffered
        record = audit.closing([endings.ledger_unavailable("w", "bump")])
        audit.keep(record)
        kept = record.dumps()
    other = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        assert BatchRecord.loads(kept).write(other) is Recorded.new
        row = other.batch(batch.id)
        assert (row.key, row.fingerprint, row.deadline_at) == ("k", "f", columns["deadline_at"])
        assert other.plan(batch.id) == {"p": 1}
        assert len(other.calls(batch.id)) == 4
        assert other.ends(batch.id)["w"].error.kind == "ledger"
        assert [e.effect for e in other.events(batch.id, "w") if e.kind == "decision"] == ["allow"]
    finally:
        other.close()
    assert ledger._buffer.flush()  # the submitter's own copy then finds it recorded
    assert audit.theirs is True
    assert [e.effect for e in ledger.events(batch.id, "w") if e.kind == "decision"] == ["allow"]


def test_a_batch_recorded_before_gets_no_decision_and_no_end(ledger, audited, tmp_path):
    """The second submitter of a key (here with a rule that denies the write)
    writes nothing: one decision per call, and the first record's ends."""
    batch, rules, admissions = audited
    assert BatchAudit(ledger, batch, rules).admissions(admissions) is Recording.recorded
    before = [(e.call_id, e.kind, e.effect) for e in ledger.events(batch.id)]
    other = policy(tmp_path, deny=["bump"])
    again = [
        admit(call, registry=REGISTRY, mode=batch.mode, workspace=tmp_path, policy=other)
        for call in batch.calls
    ]
    assert BatchAudit(ledger, batch, other).admissions(again) is Recording.found
    assert [(e.call_id, e.kind, e.effect) for e in ledger.events(batch.id)] == before
    assert {c.call_id: c.status for c in ledger.calls(batch.id)}["w"] == "pending"
    assert ledger.batch(batch.id).policy_version == rules.version


def test_buffered_ends_of_a_batch_another_submitter_recorded_are_not_written(
    ledger, audited, tmp_path
):
    """Rows that waited for the ledger find the key's batch recorded by
    another process: this process's ends (its side effects, ended unrun
    while the ledger was down) are not that batch's."""
    batch, rules, admissions = audited
    audit = BatchAudit(ledger, batch, rules)
    with locked_sqlite(f"sqlite:///{tmp_path / 'ledger.db'}"):
        assert audit.admissions(admissions) is Recording.buffered
        audit.keep(audit.closing([endings.ledger_unavailable("w", "bump")]))
    assert BatchAudit(ledger, batch, rules).admissions(admissions) is Recording.recorded
    assert ledger._buffer.flush()
    assert {c.call_id: c.status for c in ledger.calls(batch.id)}["w"] == "pending"
    assert len([e for e in ledger.events(batch.id, "w") if e.kind == EventKind.decision]) == 1


def test_decision_rows_are_redacted_once_by_the_ledger_that_writes_them(tmp_path):
    """The submitter's record is written as its audit made it (redacted with
    this ledger's redactor); a record whose rows another redactor made (one
    read back from the cluster's copy) is redacted by the ledger writing it."""
    writer = Ledger(f"sqlite:///{tmp_path / 'l.db'}", redactor=redactor_for({"zoo": r"zebra\d+"}))
    try:
        for made_by in (writer.redactor, BUILT_IN):
            batch = Batch(calls=[ToolCall(id="a", name="nap")], workspace=str(tmp_path))
            said = event_fields(
                batch.id, "a", EventKind.decision, redactor=made_by, reason="zebra42 said so"
            )
            record = BatchRecord(batch, {"a": "read"}, None, [said], [], None, {}, made_by)
            assert record.write(writer) is Recorded.new
            [row] = writer.events(batch.id, "a")
            assert row.reason == "[REDACTED:zoo] said so"
    finally:
        writer.close()


def test_the_gateways_owner_row_rides_the_batchs_record_once(ledger, audited):
    """The owner row is written in the record's transaction, with the batch's
    format; a record that finds its batch recorded writes no owner either."""
    batch, rules, admissions = audited
    audit = BatchAudit(ledger, batch, rules, owner={"key_id": "k1", "key_name": "alice"})
    columns = {"format": "anthropic"}
    assert audit.admissions(admissions, columns=columns) is Recording.recorded
    assert audit.owned
    again = BatchAudit(ledger, batch, rules, owner={"key_id": "k2", "key_name": "mallory"})
    assert again.admissions(admissions, columns=columns) is Recording.found
    assert not again.owned
    found = Keys(ledger).owner(batch.id)
    assert (found.key_id, found.key_name, found.format) == ("k1", "alice", "anthropic")


def test_a_kept_record_keeps_its_owner(ledger, audited, tmp_path):
    batch, rules, admissions = audited
    audit = BatchAudit(ledger, batch, rules, owner={"key_id": "k1", "key_name": "alice"})
    with locked_sqlite(f"sqlite:///{tmp_path / 'ledger.db'}"):
        assert audit.admissions(admissions) is Recording.buffered
        kept = audit.closing([]).dumps()
    assert not audit.owned  # the gateway then writes it on its own
    assert BatchRecord.loads(kept).write(ledger) is Recorded.new
    assert Keys(ledger).owner(batch.id).key_name == "alice"


def test_a_record_made_with_its_plans_text_reads_back_as_one_made_with_its_dict(ledger, audited):
    """A batch sent before it is recorded: its plan's JSON, made once for the
    copy, goes into the kept record as it is; the ledger's row takes the dict
    given after (`planned`)."""
    batch, rules, admissions = audited
    plan = {"batch": {"id": batch.id}, "note": "é \U0001f600", "stages": [[1, 2.5, None]]}
    audit = BatchAudit(ledger, batch, rules)
    record = audit.prepare(admissions)
    spliced = BatchRecord.loads(record.dumps(plan_text=json.dumps(plan)))
    assert spliced == BatchRecord.loads(record.with_plan(plan).dumps())
    assert spliced.plan == plan and isinstance(spliced.events[0]["at"], datetime)
    audit.planned(plan)
    assert audit.write() is Recording.recorded
    assert ledger.plan(batch.id) == plan
