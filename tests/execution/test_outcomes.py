"""A delivery's outcome when its call's end was published before it could run:
another delivery failed closed with the ledger away and told the caller the
call did not run, so it never runs, and the ledger takes that end
(docs/architecture.md, "One end per call"). In-process: a real SQLite ledger
and the in-process transport's state."""

import pytest

from runtime.execution.executor import execute
from runtime.execution.handover import Previous
from runtime.ledger.store import Ledger
from runtime.results import endings
from runtime.results.formatter import success
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import Batch, CallMessage, Status, ToolCall
from runtime.worker.in_memory import memory_transport
from tests.support.messages import KEY, message
from tests.support.tools import marks

ALLOW = {"allow": ["bump"]}


@pytest.fixture
def env(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    registry, settings = load_tools(["tests.support.tools"]), Settings(home=tmp_path)
    state = memory_transport(registry=registry, ledger=ledger, settings=settings, key=KEY)
    calls = [ToolCall(id=c, name="bump", arguments={"label": c}) for c in ("v", "w")]
    ledger.record_batch(Batch(id="b", calls=calls, workspace=str(workspace)))

    def run(call_id: str, previous: Previous | None = None):
        raw = message(
            call_id, "bump", {"label": call_id}, workspace=workspace, batch_id="b", rules=ALLOW
        )
        return execute(
            CallMessage.from_wire(raw),
            registry=registry,
            ledger=ledger,
            settings=settings,
            key=KEY,
            worker="w@h",
            state=state,
            previous=previous,
        )

    run.workspace, run.ledger, run.state = workspace, ledger, state
    yield run
    state.close()
    ledger.close()


@pytest.mark.parametrize("how", ["alone", "as a chain's next step"])
def test_a_call_whose_end_was_published_first_never_runs_and_keeps_that_end(env, how):
    told = endings.ledger_unavailable("w", "bump", worker="other@h", attempts=1)
    assert env.state.stake("b", told)  # the delivery that failed closed, its row lost
    previous = None
    if how != "alone":  # v ran under its claim; its end goes with w's claim
        env.ledger.claim("b", "v", worker="w@h")
        v = success("v", "bump", "bumped", max_bytes=1024, worker="w@h", attempts=1)
        previous = Previous("b", v, lambda ended, lease: None)
    outcome = env("w", previous)
    assert (outcome.result, outcome.ended) == (told, False)
    assert marks(env.workspace, "effects") == []
    kept = env.ledger.ends("b")
    assert (kept["w"].status, kept["w"].model_message) == (Status.error, told.model_message)
    assert env.state.holds("b", ["w"]) == {}
    if previous is not None:
        assert previous.leased == "w" and kept["v"].status is Status.ok
