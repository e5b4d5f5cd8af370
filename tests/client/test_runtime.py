"""`Runtime` itself, on the in-memory transport (runtime/transport/memory.py):
a context manager that closes it, `asubmit` off the event loop, and one
followed run per batch in a process however many handles it has."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from runtime.client import Runtime
from runtime.errors import InvalidBatch
from runtime.ledger.store import Ledger
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import ApprovalRequested, Status
from runtime.worker.in_memory import memory_transport

ASKS = [{"id": "w", "name": "bump", "arguments": {"label": "w"}}]  # a write: asks in default mode


@pytest.fixture
def make(tmp_path, workspace):
    """Runtimes on the in-memory transport whose user settings trust `workspace`."""
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"trusted_workspaces": [str(workspace)]}))
    made = []

    def runtime() -> Runtime:
        settings = Settings(home=tmp_path / "home", user_settings_file=user)
        ledger = Ledger(f"sqlite:///{tmp_path / f'ledger-{len(made)}.db'}")
        registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
        transport = memory_transport(registry=registry, ledger=ledger, settings=settings)
        made.append(Runtime(settings, registry=registry, ledger=ledger, transport=transport))
        return made[-1]

    yield runtime
    for runtime in made:
        runtime.close()


def _asked(handle) -> ApprovalRequested:
    event = next(iter(handle.stream(notices=True)))
    assert isinstance(event, ApprovalRequested), event
    return event


def test_leaving_a_with_block_closes_the_runtime_and_ends_its_open_batches(make, workspace):
    with make() as rt:
        handle = rt.submit(ASKS, mode="default", workspace=workspace)
        _asked(handle)
    [result] = handle.results()
    assert result.status is Status.cancelled and "the runtime was closed" in result.model_message
    with pytest.raises(InvalidBatch, match="closed"):
        rt.submit(ASKS, mode="default", workspace=workspace)


def test_leaving_an_async_with_block_closes_it_too(make, workspace):
    async def main():
        async with make() as rt:
            handle = await rt.asubmit(ASKS, mode="default", workspace=workspace)
            async for event in handle.astream():
                assert isinstance(event, ApprovalRequested)
                break
        return await handle.results()

    [result] = asyncio.run(main())
    assert result.status is Status.cancelled


def test_asubmit_does_its_blocking_work_off_the_event_loop(make, workspace):
    rt = make()
    submitted_on = []
    submit = rt.submit

    def recording(*args, **options):
        submitted_on.append(threading.current_thread())
        return submit(*args, **options)

    rt.submit = recording

    async def main():
        handle = await rt.asubmit(ASKS, mode="default", workspace=workspace)
        async for event in handle.astream():
            assert isinstance(event, ApprovalRequested)
            break
        assert handle.handle.deny("w", "no", by="test")
        return await handle.results(), threading.current_thread()

    [result], loop_thread = asyncio.run(main())
    assert result.status is Status.denied
    assert submitted_on and submitted_on[0] is not loop_thread


def test_attaching_to_a_batch_this_process_follows_shares_its_events(make, workspace):
    rt = make()
    first = rt.submit(ASKS, mode="default", workspace=workspace)
    _asked(first)
    second = rt.attach(first.batch_id)
    assert rt._follower.open_runs() == [first._run] and second._run is first._run
    assert first.deny("w", "no", by="test")
    assert second.results()[0].status is Status.denied and first.done


def test_a_batch_that_cannot_be_one_is_refused_at_submit(make, workspace):
    """No calls (the ledger would lose the batch's rows), a workspace path
    the system cannot even look at, duplicate ids: each an `InvalidBatch`
    before anything is written."""
    rt = make()
    with pytest.raises(InvalidBatch, match="no calls"):
        rt.submit([], mode="auto", workspace=workspace)
    with pytest.raises(InvalidBatch, match="not a directory"):
        rt.submit(ASKS, mode="auto", workspace=workspace / ("x" * 300))
    calls = [{"id": f"c{i % 9000}", "name": "echo", "arguments": {}} for i in range(10_000)]
    with pytest.raises(InvalidBatch, match="duplicate call ids in batch: c0, c1, c10, c100,"):
        rt.submit(calls, mode="auto", workspace=workspace)


def test_a_provider_turn_is_keyed_to_its_submitter(make, workspace):
    """The same turn again from its submitter attaches; from another submitter
    it is a batch of its own; one an older toolrun keyed without the submitter
    still attaches for that submitter only (docs/architecture.md, "Attach and keys")."""
    from runtime.adapters import parse
    from runtime.client.intake import earlier_turn_key

    message = {"role": "assistant", "content": [_tool_use("toolu_1")]}
    rt = make()
    first = rt.submit_message(message, mode="default", workspace=workspace, submitter="ann")
    again = rt.submit_message(message, mode="default", workspace=workspace, submitter="ann")
    other = rt.submit_message(message, mode="default", workspace=workspace, submitter="ben")
    assert first.batch_id == again.batch_id != other.batch_id
    older = {"role": "assistant", "content": [_tool_use("toolu_2")]}
    key = earlier_turn_key(parse(older), workspace)
    recorded = rt.submit(
        parse(older).calls, mode="default", workspace=workspace, key=key, submitter="ann"
    )
    retried = rt.submit_message(older, mode="default", workspace=workspace, submitter="ann")
    stranger = rt.submit_message(older, mode="default", workspace=workspace, submitter="ben")
    assert retried.batch_id == recorded.batch_id != stranger.batch_id


def _tool_use(call_id: str) -> dict:
    return {"type": "tool_use", "id": call_id, "name": "bump", "input": {"label": call_id}}
