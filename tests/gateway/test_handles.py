"""The gateway's handles (runtime/gateway/handles.py): one per batch, ended
ones dropped past the newest few, now and then rather than at each submit."""

from __future__ import annotations

from runtime import memory_runtime
from runtime.gateway import handles


def test_ended_handles_past_the_newest_are_dropped_now_and_then(monkeypatch, tmp_path):
    monkeypatch.setattr(handles, "KEEP_ENDED", 2)
    (tmp_path / "a.txt").write_text("a")
    call = {"id": "r", "name": "read_file", "arguments": {"path": "a.txt"}}
    with memory_runtime(workspace=tmp_path) as rt:
        kept = handles.Handles(rt)
        submitted = []
        for _ in range(5):
            handle = kept.submit([call], None, None, mode="auto", workspace=str(tmp_path))
            handle.results(timeout=30)
            submitted.append(handle.batch_id)
        # Looks at the 2nd and the 4th submit (the one just added may have
        # ended or not): the oldest went, never more than twice the count.
        held = [kept.held(batch_id) is not None for batch_id in submitted]
        assert not held[0] and held[-1] and sum(held) <= 4
        assert kept.get(submitted[0]).batch_id == submitted[0]  # attached again from the ledger
