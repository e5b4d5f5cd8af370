"""The hand-over between two chain steps run in one task, on a real SQLite
ledger: the end of the step before is written with the next step's claim, or
alone first when that step claims nothing or the claim's transaction fails;
it is published (told) only once written."""

from __future__ import annotations

import pytest

from runtime.errors import LedgerUnavailable
from runtime.execution.executor import execute
from runtime.execution.handover import Previous, claim_after
from runtime.ledger.claims import Start
from runtime.ledger.store import Ledger
from runtime.results import formatter as results
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import Batch, CallMessage, Mode, Status, ToolCall
from tests.support.faults import locked_sqlite
from tests.support.messages import KEY, message
from tests.support.waiting import wait_for

RULES = {"allow": ["bump"]}


@pytest.fixture
def env(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    calls = [ToolCall(id=i, name="bump", arguments={"label": i}) for i in ("a", "b")]
    batch = Batch(id="b1", calls=calls, mode=Mode.auto, workspace=str(workspace))
    ledger.record_batch(batch)
    yield ledger, workspace
    ledger.close()


def ran(ledger: Ledger, told: list) -> Previous:
    """Step a, claimed and run: its end waits for step b."""
    assert ledger.claim("b1", "a", worker="w").start is Start.run
    done = results.success("a", "bump", "bumped", max_bytes=1024, worker="w")
    return Previous("b1", done, lambda ended, lease: told.append(ended))


def step(workspace, call_id: str, **options) -> CallMessage:
    return CallMessage.from_wire(
        message(call_id, "bump", {"label": call_id}, workspace=workspace, rules=RULES, **options)
    )


def test_the_end_of_a_step_and_the_claim_of_the_next_are_one_transaction(env):
    ledger, workspace = env
    told: list = []
    previous = ran(ledger, told)
    begun = claim_after(ledger, step(workspace, "b"), "w", previous)
    assert begun.start is Start.run and told == [True]
    assert previous.leased == "b"  # b's lease is taken as a's end is published
    rows = {row.call_id: row.status for row in ledger.calls("b1")}
    assert rows == {"a": "ok", "b": "running"}
    kinds = [(e.call_id, e.kind) for e in ledger.events("b1")]
    assert kinds.index(("a", "finished")) < kinds.index(("b", "started"))


def test_an_end_already_written_is_not_told_as_this_deliverys_nor_claims_the_next(env):
    """Step a was judged lost while it ran (its end written by the sweep): its
    own end loses the compare-and-set, and the process that was fenced off
    does not claim step b with it (docs/architecture.md, "Leases")."""
    ledger, workspace = env
    told: list = []
    previous = ran(ledger, told)
    ledger.record_result("b1", results.failure("a", "bump", Status.outcome_unknown, "lost"))
    assert claim_after(ledger, step(workspace, "b"), "w", previous).start is Start.taken
    assert told == [False] and previous.leased is None
    assert ledger.ends("b1")["a"].status is Status.outcome_unknown
    assert {row.call_id: row.status for row in ledger.calls("b1")}["b"] != "running"
    assert ledger.claim("b1", "b", worker="v").start is Start.run  # the resent copy's


def test_a_next_step_that_claims_nothing_writes_the_end_alone_first(env, tmp_path):
    ledger, workspace = env
    told: list = []
    previous = ran(ledger, told)
    forged = step(workspace, "b", key=b"another key")  # refused: it never gets to a claim
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    outcome = execute(
        forged,
        registry=registry,
        ledger=ledger,
        settings=Settings(home=tmp_path),
        key=KEY,
        previous=previous,
    )
    assert outcome.result.status is Status.denied and told == [True]
    kinds = [(e.call_id, e.kind) for e in ledger.events("b1")]
    assert kinds.index(("a", "finished")) < kinds.index(("b", "decision"))


def test_a_claim_the_ledger_cannot_take_still_costs_the_step_before_nothing(tmp_path):
    """The ledger write-locked by another process: the claim fails closed,
    and the end of the step before waits in the buffer, told as unknown
    (None: published as "may have ended"), and lands once the lock is gone."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = Ledger(url, retry_seconds=0.3)
    batch = Batch(
        id="b1",
        calls=[ToolCall(id=i, name="bump", arguments={"label": i}) for i in ("a", "b")],
        mode=Mode.auto,
        workspace=str(tmp_path),
    )
    ledger.record_batch(batch)
    told: list = []
    previous = ran(ledger, told)
    with locked_sqlite(url), pytest.raises(LedgerUnavailable):
        claim_after(ledger, step(tmp_path, "b"), "w", previous)
    assert told == [None]
    wait_for(lambda: "a" in ledger.ends("b1"), what="the buffered end landing")
    assert ledger.ends("b1")["a"].ok and {r.call_id: r.status for r in ledger.calls("b1")} == {
        "a": "ok",
        "b": "pending",
    }
    ledger.close()


def test_an_end_published_first_for_the_next_step_read_with_its_lease_stops_it(env, tmp_path):
    """The next step's end was published before (a delivery of it failed
    closed while the ledger was away): the publish that took its lease read
    that end (`Worker.publish`), so the step does not run, and its row takes
    the end its caller got."""
    from runtime.transport.riding import Recalled

    ledger, workspace = env
    first = results.failure("b", "bump", Status.error, "the ledger is unavailable", kind="ledger")
    recalled = Recalled("b1", "b")
    recalled.known, recalled.result = True, first
    told: list = []
    assert ledger.claim("b1", "a", worker="w").start is Start.run
    done = results.success("a", "bump", "bumped", max_bytes=1024, worker="w")
    previous = Previous("b1", done, lambda ended, lease: told.append((ended, lease)) or recalled)
    outcome = execute(
        step(workspace, "b"),
        registry=load_tools(["tests.support.tools"], mcp_servers_file=None),
        ledger=ledger,
        settings=Settings(home=tmp_path),
        key=KEY,
        previous=previous,
    )
    assert (outcome.result, outcome.ended, told) == (first, False, [(True, "b")])
    assert ledger.ends("b1")["b"].status is Status.error
