"""Ends announced on the result bus that the ledger lacks (runtime/batch/unrecorded.py),
through the advancer as the sweep drives it: a real SQLite ledger, the in-memory
transport's state standing for Redis. Such an end is written from its announced
copy once it has lacked its row for the patience, never before, and once."""

from __future__ import annotations

from runtime.settings import Settings
from runtime.testing import memory_runtime
from runtime.types import Status, ToolResult
from tests.batch.test_advance import nap, world  # noqa: F401 - the fixture

ANNOUNCED = ToolResult(
    call_id="r1",
    tool="nap",
    status=Status.ok,
    model_message="napped",
    summary="napped",
    worker="reads@host",
    attempts=1,
)


def announce(world, batch_id: str, result: ToolResult = ANNOUNCED) -> None:  # noqa: F811
    """What a worker whose ledger row never landed left: its end on the bus only."""
    world.transport.publish(batch_id, result, reply_to=None)


def test_an_end_the_ledger_lacks_is_left_to_its_buffer_within_the_patience(world):  # noqa: F811
    plan, _ = world.record(nap("r1"))
    announce(world, plan.batch.id)
    assert world.advancer.advance(plan.batch.id) is True  # every call has an end ...
    assert world.ledger.ends(plan.batch.id) == {}  # ... but the ledger's is not written yet
    assert world.ledger.batch(plan.batch.id).ended_at is None


def test_past_the_patience_the_announced_end_is_written_and_the_batch_ends(world):  # noqa: F811
    plan, _ = world.record(nap("r1"), nap("r2"))
    world.advancer.unrecorded.patience = 0.0
    announce(world, plan.batch.id)
    announce(world, plan.batch.id, ANNOUNCED.model_copy(update={"call_id": "r2"}))
    assert world.advancer.advance(plan.batch.id) is True
    ends = world.ledger.ends(plan.batch.id)
    assert {c: r.status for c, r in ends.items()} == {"r1": Status.ok, "r2": Status.ok}
    assert ends["r1"].worker == "reads@host"
    assert world.ended(plan.batch.id)


def test_a_row_that_landed_meanwhile_wins(world):  # noqa: F811
    plan, _ = world.record(nap("r1"))
    landed = ANNOUNCED.model_copy(update={"summary": "from the worker's buffer"})
    assert world.ledger.record_result(plan.batch.id, landed)
    world.advancer.unrecorded.patience = 0.0
    announce(world, plan.batch.id)
    assert world.advancer.unrecorded.look(plan.batch.id, {"r1": ANNOUNCED}) == []
    assert world.ledger.ends(plan.batch.id)["r1"].summary == "from the worker's buffer"


def test_the_patience_is_a_setting_of_the_client_and_the_worker(tmp_path):
    settings = Settings(
        home=tmp_path / "home", user_settings_file=tmp_path / "user.json", unrecorded_patience=2.5
    )
    with memory_runtime(settings=settings) as runtime:
        assert runtime._services.advancer.unrecorded.patience == 2.5  # the client's
        assert runtime._transport.worker.advancer.unrecorded.patience == 2.5  # the worker's
