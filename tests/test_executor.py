"""The executor in-process, with a real SQLite ledger: no broker needed."""

import pytest

from runtime.executor import execute
from runtime.ledger import Ledger
from runtime.registry import load_tools
from runtime.settings import Settings
from runtime.types import Batch, CallMessage, Mode, Status, ToolCall
from tests.support.tools import marks

SECRET = "sk-ant-api03-" + "S3cr3t" * 6


@pytest.fixture
def env(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    registry = load_tools(["tests.support.tools"])
    settings = Settings(home=tmp_path)

    def run(tool, arguments, mode=Mode.auto, call_id="c1"):
        batch = Batch(
            id="b1",
            calls=[ToolCall(id=call_id, name=tool, arguments=arguments)],
            mode=mode,
            workspace=str(workspace),
        )
        ledger.record_batch(batch)
        message = CallMessage(
            batch_id="b1",
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            mode=mode,
            workspace=str(workspace),
            position=0,
        )
        return execute(message, registry=registry, ledger=ledger, settings=settings, worker="w@h")

    run.workspace, run.ledger = workspace, ledger
    yield run
    ledger.close()


def test_a_successful_call_is_formatted_and_recorded(env):
    result = env("bump", {"label": "x"})
    assert result.status is Status.ok and result.worker == "w@h" and result.attempts == 1
    kinds = [row.kind for row in env.ledger.events("b1", "c1")]
    assert kinds == ["started", "finished"]
    assert env.ledger.calls("b1")[0].status == "ok"


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
    assert marks(env.workspace, "effects") == []


def test_secrets_in_arguments_never_come_back(env):
    result = env("echo", {"text": f"key={SECRET}"})
    assert SECRET not in result.model_dump_json()
    rows = env.ledger.events("b1")
    assert SECRET not in str([row.model_dump() for row in rows])
    assert SECRET not in str([row.model_dump() for row in env.ledger.calls("b1")])
