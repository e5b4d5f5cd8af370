"""Submit keys on the real stack, from real processes (docs/architecture.md,
"Attach and keys"): however many submitters of one key race, the ledger holds
one batch, one decision per call and the end each call in fact had; a key
submitted again with other rules is refused and writes nothing."""

from __future__ import annotations

import os
import uuid
from collections import Counter

import pytest

from runtime.errors import InvalidBatch
from runtime.ledger.store import EventKind
from runtime.settings import Settings
from runtime.types import Status
from tests.conftest import TEST_TOOLS, runtime_on
from tests.support.postgres import fresh_database
from tests.support.racer import race
from tests.support.tools import held_running, marks, release

pytestmark = pytest.mark.timeout(180)
ALLOW = {"allow": ["bump", "held_write"]}
DENY = {"deny": ["bump", "held_write"]}


LEDGERS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module", params=LEDGERS)
def keyed(request, user_settings, tmp_path_factory):
    """A stack and a client of it: the session's (SQLite), or one of its own
    whose ledger is a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield request.getfixturevalue("stack"), request.getfixturevalue("runtime")
        return
    from runtime.stack.embedded import start_stack, stop_stack

    url = os.environ.get("TOOLRUN_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TOOLRUN_TEST_POSTGRES_URL not set: PostgreSQL tests skipped")
    with fresh_database(url) as database_url:
        home = tmp_path_factory.mktemp("toolrun-keys-postgres")
        settings = Settings(
            home=home, redis_url=None, database_url=database_url, tool_modules=TEST_TOOLS
        )
        try:
            stack = start_stack(
                settings, flower=False, extra_env={"TOOLRUN_TOOL_MODULES": TEST_TOOLS}
            )
            runtime = runtime_on(stack, user_settings)
            yield stack, runtime
            runtime.close()
        finally:
            stop_stack(home)


def call(call_id: str, name: str, **arguments) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments}


def decisions(runtime, batch_id: str) -> Counter:
    """Decision rows per call (a refusal's decision is on its end's row)."""
    return Counter(e.call_id for e in runtime.ledger.events(batch_id) if e.effect is not None)


def test_five_processes_submitting_one_key_leave_one_decision_per_call(
    keyed, user_settings, workspace, tmp_path
):
    stack, runtime = keyed
    calls = [
        call("w1", "bump", label="w1"),
        call("w2", "bump", label="w2"),
        call("r", "nap", label="r"),
    ]
    spec = {
        "calls": calls,
        "mode": "auto",
        "workspace": str(workspace),
        "rules": ALLOW,
        "timeout": 60,
        "key": f"race-{uuid.uuid4().hex}",
    }
    outcomes = race(stack, user_settings, [spec] * 5, tmp_path / "start")
    assert all("batch_id" in outcome for outcome in outcomes), outcomes
    (batch_id,) = {outcome["batch_id"] for outcome in outcomes}
    results = runtime.attach(batch_id).results(timeout=60)
    assert [r.status for r in results] == [Status.ok] * 3
    assert decisions(runtime, batch_id) == {"w1": 1, "w2": 1, "r": 1}
    assert Counter(m["label"] for m in marks(workspace, "effects")) == {"w1": 1, "w2": 1}
    assert len(runtime.ledger.ends(batch_id)) == 3


def test_racing_submitters_with_other_rules_never_end_a_call_that_ran_denied(
    keyed, user_settings, workspace, tmp_path
):
    """Three submitters allow the side effect, three deny it, all with one
    key: whichever recorded the batch first decided it; the others with its
    rules attach, those with the other rules are refused; the ledger's one
    decision and one end agree with what ran."""
    stack, runtime = keyed
    spec = {
        "calls": [call("w", "bump", label="w")],
        "mode": "auto",
        "workspace": str(workspace),
        "timeout": 60,
        "key": f"race-{uuid.uuid4().hex}",
    }
    specs = [{**spec, "rules": ALLOW}, {**spec, "rules": DENY}] * 3
    outcomes = race(stack, user_settings, specs, tmp_path / "start")
    (batch_id,) = {outcome["batch_id"] for outcome in outcomes if "batch_id" in outcome}
    [result] = runtime.attach(batch_id).results(timeout=60)
    events = runtime.ledger.events(batch_id, "w")
    [decided] = [e.effect for e in events if e.effect is not None]
    ran = marks(workspace, "effects")
    if decided == "allow":
        assert (result.status, len(ran)) == (Status.ok, 1)
    else:
        assert (decided, result.status, ran) == ("deny", Status.denied, [])
    assert runtime.ledger.ends(batch_id)["w"].status is result.status
    assert [e.status for e in events if e.status] == [result.status.value]
    winners = ALLOW if decided == "allow" else DENY
    for rules, outcome in zip([s["rules"] for s in specs], outcomes, strict=True):
        if rules is winners:
            assert outcome == {"batch_id": batch_id}
        else:
            assert "other rules" in outcome.get("refused", ""), outcome


def test_a_key_submitted_again_with_a_deny_rule_while_its_call_runs_is_refused(
    keyed, user_settings, workspace, tmp_path, request
):
    """The reported case: A allows a side effect and it runs; B submits the
    same key and calls with a rule denying it. B is refused and writes
    nothing; the call's end is the one it had, `ok`, and no row says denied."""
    stack, runtime = keyed
    request.addfinalizer(lambda: release(workspace, "w"))
    calls = [call("w", "held_write", label="w")]
    spec = {
        "calls": calls,
        "mode": "auto",
        "workspace": str(workspace),
        "timeout": 60,
        "key": f"reported-{uuid.uuid4().hex}",
    }
    [first] = race(stack, user_settings, [{**spec, "rules": ALLOW}], tmp_path / "a")
    held_running(workspace, 1)
    written = [(e.call_id, e.kind, e.effect) for e in runtime.ledger.events(first["batch_id"])]
    [second] = race(stack, user_settings, [{**spec, "rules": DENY}], tmp_path / "b")
    assert "other rules" in second.get("refused", ""), second
    with pytest.raises(InvalidBatch, match="other rules"):
        runtime.submit(**{**spec, "rules": DENY})
    after = [(e.call_id, e.kind, e.effect) for e in runtime.ledger.events(first["batch_id"])]
    assert after[: len(written)] == written and ("w", EventKind.decision, "deny") not in after
    release(workspace, "w")
    [result] = runtime.attach(first["batch_id"]).results(timeout=60)
    assert result.status is Status.ok
    events = runtime.ledger.events(first["batch_id"], "w")
    assert [e.effect for e in events if e.effect is not None] == ["allow"]
    assert [e.status for e in events if e.status] == ["ok"]
    assert runtime.ledger.calls(first["batch_id"])[0].status == "ok"
