"""Group commit: ends that arrive together share a transaction; each caller
returns only once its own end is committed, and gets its transaction's error."""

import threading
import time

import pytest

from runtime.ledger.ends import CallEnd
from runtime.ledger.group import CommitGroup
from runtime.ledger.store import Ledger
from runtime.ledger.tables import utc_now
from runtime.results import formatter as results
from runtime.types import Batch, Mode, ToolCall
from tests.support.postgres import own_ledger


def end(call_id: str, batch_id: str = "b") -> CallEnd:
    result = results.success(call_id, "nap", "slept", max_bytes=1024, worker="w", attempts=1)
    return CallEnd(batch_id, result, started_at=utc_now())


def at_once(count: int, work) -> list[BaseException | None]:
    """`work(i)` on `count` threads started together; what each raised."""
    gate, raised = threading.Barrier(count), [None] * count

    def run(i: int) -> None:
        gate.wait()
        try:
            work(i)
        except BaseException as error:  # noqa: BLE001 - collected for the assertions
            raised[i] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return raised


def test_ends_that_arrive_together_share_transactions_and_none_is_lost():
    written: list[list[str]] = []

    def write(ends):
        time.sleep(0.02)  # a commit that takes a while: others queue meanwhile
        written.append([e.call_id for e in ends])
        return [None] * len(ends)

    group = CommitGroup(write)
    assert at_once(16, lambda i: group.write(end(f"c{i}"))) == [None] * 16
    assert sorted(c for batch in written for c in batch) == sorted(f"c{i}" for i in range(16))
    assert len(written) < 16


def test_every_caller_of_a_failed_transaction_gets_its_error():
    def write(ends):
        time.sleep(0.01)
        raise RuntimeError("ledger down")

    group = CommitGroup(write)
    raised = at_once(8, lambda i: group.write(end(f"c{i}")))
    assert all(isinstance(error, RuntimeError) for error in raised)


def test_a_real_ledger_gets_every_end_written_together(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    calls = [ToolCall(id=f"c{i}", name="nap", arguments={}) for i in range(16)]
    ledger.record_batch(Batch(id="b", calls=calls, mode=Mode.auto, workspace=str(tmp_path)))
    assert at_once(16, lambda i: ledger.record_end(end(f"c{i}"))) == [None] * 16
    assert {row.status for row in ledger.calls("b")} == {"ok"}
    kinds = [e.kind for e in ledger.events("b", "c7")]
    assert kinds == ["started", "finished"]
    ledger.close()


def test_a_lone_end_waits_for_nobody():
    written = []
    CommitGroup(lambda ends: written.append(ends) or [None]).write(end("alone"))
    assert [[e.call_id for e in ends] for ends in written] == [["alone"]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_ledger(request, tmp_path):
    with own_ledger(request.param, tmp_path) as found:
        yield found


def race(ledger: Ledger, batch_id: str) -> str:
    """The client records a one-call batch while a worker ends that call; the
    call row's status once both have committed."""
    calls = [ToolCall(id="c0", name="nap", arguments={})]
    batch = Batch(id=batch_id, calls=calls, mode=Mode.auto, workspace=".")
    work = [lambda: ledger.record_batch(batch), lambda: ledger.record_end(end("c0", batch_id))]
    assert at_once(2, lambda i: work[i]()) == [None, None]
    [row] = ledger.calls(batch_id)
    return row.status


def test_a_worker_ending_a_call_while_its_client_records_the_batch_loses_nothing(any_ledger):
    """A read may end before its batch is recorded: whichever commits first,
    the call row ends `ok`."""
    assert [race(any_ledger, f"race-{n}") for n in range(30)] == ["ok"] * 30
