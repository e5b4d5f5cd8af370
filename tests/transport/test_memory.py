"""The in-memory transport as a worker sees it: it runs what a client signed and
nothing else, counts deliveries and keeps results for the batch to read, and
runs a chain's steps in one task. (tests/batch/ runs whole batches on it.)"""

from __future__ import annotations

import json

import pytest

from runtime.errors import ConfigurationError
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import Batch, CallMessage, Mode, Status, ToolCall
from runtime.worker.in_memory import memory_transport
from tests.support.in_memory import in_memory
from tests.support.messages import KEY, message
from tests.support.tools import marks


@pytest.fixture
def transport(tmp_path):
    with in_memory(tmp_path) as transport:
        yield transport


@pytest.fixture
def ledger(transport):
    return transport.worker.ledger


def recorded(ledger, workspace, *calls: tuple[str, str]) -> str:
    """A batch the ledger knows, as a client records it before sending."""
    batch = Batch(
        calls=[ToolCall(id=i, name=n, arguments={}) for i, n in calls],
        mode=Mode.auto,
        workspace=str(workspace),
    )
    ledger.record_batch(batch)
    return batch.id


def test_a_signed_message_runs_and_its_result_waits_for_the_batch(transport, ledger, tmp_path):
    batch_id = recorded(ledger, tmp_path, ("r", "nap"))
    raw = message("r", "nap", {"label": "a"}, workspace=tmp_path, batch_id=batch_id)
    transport.post([CallMessage.from_wire(raw)], parallel=True)
    [result] = transport.watch(batch_id).results({"r"}, timeout=10)
    assert (result.status, result.worker) == (Status.ok, "memory")
    assert transport.recall(batch_id, "r") == result
    [taken] = transport.taken
    assert taken.sent_at is not None  # stamped when posted, as the Celery queue does
    assert taken.wire() == raw | {"sent_at": taken.sent_at}


def test_a_message_signed_with_another_key_is_refused_and_runs_nothing(transport, ledger, tmp_path):
    batch_id = recorded(ledger, tmp_path, ("w", "bump"))
    raw = message(
        "w",
        "bump",
        {"label": "x"},
        workspace=tmp_path,
        batch_id=batch_id,
        key=b"another key",
        rules={"allow": ["bump"]},
    )
    transport.post([CallMessage.from_wire(raw)], parallel=False)
    [result] = transport.arrived(batch_id, {"w"}, timeout=10)
    assert result.status is Status.denied and "signature" in result.model_message
    assert marks(tmp_path, "effects") == []


def test_a_worker_runs_a_chain_in_one_task_and_a_cancel_stops_what_has_not_started(
    transport, ledger, tmp_path
):
    batch_id = recorded(ledger, tmp_path, ("a", "bump"), ("b", "bump"))
    steps = [
        CallMessage.from_wire(
            message(
                i,
                "bump",
                {"label": i},
                workspace=tmp_path,
                batch_id=batch_id,
                rules={"allow": ["bump"]},
            )
        )
        for i in ("a", "b")
    ]
    transport.post(steps, parallel=False, chained=True)
    inbox, done = transport.watch(batch_id), []
    while len(done) < 2 and (fresh := inbox.results({"a", "b"} - {r.call_id for r in done}, 10)):
        done += fresh
    assert [r.status for r in done] == [Status.ok, Status.ok]
    assert [m.call_id for m in transport.taken] == ["a"]  # one message: b rode along
    assert [m["label"] for m in marks(tmp_path, "effects")] == ["a", "b"]
    transport.cancel(batch_id, by="test")
    assert inbox.cancelled and transport.look(batch_id, "c").cancelled


def test_rates_caps_and_fair_share_are_refused_at_startup_sizes_are_kept(tmp_path):
    """One process holds no rate, slot or fair share: the transport says so
    at once instead of running a test as if they held."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    org = tmp_path / "org.json"
    rate = {"name": "fetches", "per": "key", "limit": "5/second"}
    org.write_text(json.dumps({"limits": {"rate": [rate], "fair_share": {}}}))
    settings = Settings(home=tmp_path, policy_file=org)
    with pytest.raises(ConfigurationError, match=r"limits.rate \(fetches from .*org.json\)"):
        memory_transport(registry=registry, ledger=ledger, settings=settings, key=KEY)
    org.write_text(json.dumps({"limits": {"size": {"calls_per_batch": 5}}}))
    memory_transport(registry=registry, ledger=ledger, settings=settings, key=KEY).close()
    ledger.close()
