"""A delivery's outcome when its call's end was published before it could run:
another delivery failed closed with the ledger away and told the caller the
call did not run, so it never runs, and the ledger takes that end
(docs/architecture.md, "One end per call"). In-process: a real SQLite ledger
and the in-process transport's state."""

from runtime.execution.executor import execute
from runtime.ledger.store import Ledger
from runtime.results import endings
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import Batch, CallMessage, Status, ToolCall
from runtime.worker.memory import MemoryTransport
from tests.support.messages import KEY, message
from tests.support.tools import marks


def test_a_call_whose_end_was_published_first_never_runs_and_keeps_that_end(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    registry, settings = load_tools(["tests.support.tools"]), Settings(home=tmp_path)
    state = MemoryTransport(registry=registry, ledger=ledger, settings=settings, key=KEY)
    try:
        call = ToolCall(id="w", name="bump", arguments={"label": "w"})
        ledger.record_batch(Batch(id="b", calls=[call], workspace=str(workspace)))
        told = endings.ledger_unavailable("w", "bump", worker="other@h", attempts=1)
        assert state.stake("b", told)  # the delivery that failed closed, its row lost
        rules = {"allow": ["bump"]}
        raw = message("w", "bump", {"label": "w"}, workspace=workspace, batch_id="b", rules=rules)
        outcome = execute(
            CallMessage.from_wire(raw),
            registry=registry,
            ledger=ledger,
            settings=settings,
            key=KEY,
            worker="w@h",
            state=state,
        )
        assert (outcome.result, outcome.ended) == (told, False)
        assert marks(workspace, "effects") == []
        kept = ledger.ends("b")["w"]
        assert (kept.status, kept.model_message) == (Status.error, told.model_message)
        assert state.holds("b", ["w"]) == {}
    finally:
        state.close()
        ledger.close()
