"""The executor in-process, with a real SQLite ledger: no broker needed."""

import pytest

from runtime.execution.executor import execute
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import Batch, CallMessage, Mode, Status, ToolCall
from tests.support.messages import KEY, message
from tests.support.tools import marks

SECRET = "sk-ant-api03-" + "S3cr3t" * 6


@pytest.fixture
def env(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    registry = load_tools(["tests.support.tools"])
    settings = Settings(home=tmp_path)

    def run(tool, arguments, call_id="c1", raw=None, **options):
        """One call in a batch of its own (`b-<call id>`), recorded as a client would."""
        batch = Batch(
            id=f"b-{call_id}",
            calls=[ToolCall(id=call_id, name=tool, arguments=arguments)],
            mode=options.get("mode", Mode.auto),
            workspace=str(workspace),
        )
        ledger.record_batch(batch)
        options.setdefault("rules", {"allow": ["bump", "explode"]})
        raw = raw or message(
            call_id, tool, arguments, workspace=workspace, batch_id=batch.id, **options
        )
        decoded = CallMessage.from_wire(raw)
        if decoded is None:
            return None
        outcome = execute(
            decoded, registry=registry, ledger=ledger, settings=settings, key=KEY, worker="w@h"
        )
        return outcome.result

    run.workspace, run.ledger = workspace, ledger
    yield run
    ledger.close()


def test_a_successful_call_is_formatted_and_recorded(env):
    result = env("bump", {"label": "x"})
    assert result.status is Status.ok and result.worker == "w@h" and result.attempts == 1
    kinds = [row.kind for row in env.ledger.events("b-c1", "c1")]
    assert kinds == ["started", "finished"]
    assert env.ledger.calls("b-c1")[0].status == "ok"


def test_a_raising_tool_becomes_an_error_result_with_its_type(env):
    result = env("explode", {"message": "disk on fire"})
    assert result.status is Status.error
    assert result.error.kind == "ValueError"
    assert "disk on fire" in result.model_message
    assert "Traceback" not in result.model_message


def test_a_tool_past_its_timeout_ends_with_timeout(env):
    result = env("stall", {"label": "s", "seconds": 5})
    assert result.status is Status.timeout
    assert result.duration_ms < 4000


def test_the_worker_checks_again_and_runs_nothing_it_should_not(env):
    assert env("bump", {"label": 3}).status is Status.invalid_arguments
    assert env("bump", {"label": "x"}, mode=Mode.plan, call_id="c2").status is Status.disabled
    assert env("obliterate", {"label": "x"}, call_id="c3").status is Status.denied
    assert env("nope", {}, call_id="c4").status is Status.unknown_tool
    assert env("bump", {"label": "x"}, call_id="c5", rules={}).status is Status.denied
    assert marks(env.workspace, "effects") == []


def test_unsigned_forged_and_tampered_messages_never_run(env):
    unsigned = message(
        "u", "bump", {"label": "x"}, workspace=env.workspace, key=None, rules={"allow": ["bump"]}
    )
    forged = message(
        "f",
        "bump",
        {"label": "x"},
        workspace=env.workspace,
        key=b"other",
        rules={"allow": ["bump"]},
    )
    tampered = message(
        "t", "bump", {"label": "x"}, workspace=env.workspace, rules={"allow": ["bump"]}
    )
    tampered["arguments"] = {"label": "changed"}
    widened = message("w", "obliterate", {"label": "x"}, workspace=env.workspace)
    widened["policy"]["rules"].append(
        {"text": "obliterate", "effect": "allow", "level": "org", "source": "forged"}
    )
    for raw in (unsigned, forged, tampered, widened):
        result = env(raw["tool"], raw["arguments"], call_id=raw["call_id"], raw=raw)
        assert result.status is Status.denied, raw["call_id"]
        assert "signature" in result.model_message
    assert marks(env.workspace, "effects") == []
    rules = {e.call_id: e.rule for e in env.ledger.events("b1")}
    assert rules == {"u": "signature", "f": "signature", "t": "signature", "w": "signature"}


def test_a_call_that_needs_asking_runs_only_with_an_approval(env):
    asked = env("bump", {"label": "x"}, mode=Mode.default, call_id="a1", rules={})
    assert asked.status is Status.denied and "no approval" in asked.model_message
    approved = env(
        "bump", {"label": "x"}, mode=Mode.default, call_id="a2", rules={}, approved_by="alice"
    )
    assert approved.status is Status.ok
    assert [m["call_id"] for m in marks(env.workspace, "effects")] == ["a2"]


def test_secrets_in_arguments_never_come_back(env):
    result = env("echo", {"text": f"key={SECRET}"})
    assert SECRET not in result.model_dump_json()
    rows = env.ledger.events("b-c1")
    assert SECRET not in str([row.model_dump() for row in rows])
    assert SECRET not in str([row.model_dump() for row in env.ledger.calls("b-c1")])


def test_a_redelivered_side_effect_never_runs_twice(env):
    first = env("bump", {"label": "once"}, call_id="r1")
    raw = message(
        "r1",
        "bump",
        {"label": "once"},
        workspace=env.workspace,
        batch_id="b-r1",
        rules={"allow": ["bump"]},
    )
    again = env("bump", {"label": "once"}, call_id="r1", raw=raw)
    assert first.status is Status.ok and again.status is Status.ok
    assert len(marks(env.workspace, "effects")) == 1


def test_a_second_delivery_of_a_claimed_call_does_nothing(env):
    """The claim's holder ends it, or the sweep once its lease lapses; never
    the second delivery (docs/architecture.md, "Leases")."""
    call = ToolCall(id="held", name="bump", arguments={"label": "x"})
    env.ledger.record_batch(Batch(id="b-held", calls=[call], workspace=str(env.workspace)))
    env.ledger.claim("b-held", "held", worker="other@h")
    raw = message(
        "held",
        "bump",
        {"label": "x"},
        workspace=env.workspace,
        batch_id="b-held",
        rules={"allow": ["bump"]},
    )
    result = env("bump", {"label": "x"}, call_id="held", raw=raw)
    assert result.error.kind == "duplicate_delivery", result.model_message
    assert marks(env.workspace, "effects") == []
    assert env.ledger.ends("b-held") == {}
    assert [c.status for c in env.ledger.calls("b-held")] == ["running"]


def test_a_side_effect_nobody_recorded_does_not_run(env):
    raw = message(
        "ghost",
        "bump",
        {"label": "x"},
        workspace=env.workspace,
        batch_id="nowhere",
        rules={"allow": ["bump"]},
    )
    result = env("bump", {"label": "x"}, call_id="ghost2", raw=raw)
    assert result.status is Status.denied and marks(env.workspace, "effects") == []


def test_a_side_effect_of_a_batch_cancelled_before_its_claim_does_not_run(env):
    call = ToolCall(id="late", name="bump", arguments={"label": "x"})
    env.ledger.record_batch(Batch(id="b-late", calls=[call], workspace=str(env.workspace)))
    env.ledger.mark_cancelled("b-late", by="ann")  # no cancel flag in Redis: only the ledger knows
    raw = message(
        "late",
        "bump",
        {"label": "x"},
        workspace=env.workspace,
        batch_id="b-late",
        rules={"allow": ["bump"]},
    )
    result = env("bump", {"label": "x"}, call_id="late", raw=raw)
    assert result.status is Status.cancelled and marks(env.workspace, "effects") == []
    assert env.ledger.ends("b-late")["late"].status is Status.cancelled
    assert [e.kind for e in env.ledger.events("b-late", "late")] == ["cancelled"]


def test_a_shell_command_cut_off_by_its_own_timeout_has_an_unknown_outcome(env):
    command = "echo started > part.txt; sleep 30; echo done >> part.txt"
    result = env(
        "shell", {"command": command, "timeout": 0.5}, call_id="sh", rules={"allow": ["shell"]}
    )
    assert (result.status, result.error.kind) == (Status.outcome_unknown, "timeout")
    assert "may have done part of its work" in result.model_message
    assert (env.workspace / "part.txt").read_text() == "started\n"  # it did: half of it
    assert env.ledger.calls("b-sh")[0].status == "outcome_unknown"
