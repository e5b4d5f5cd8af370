"""Values no serializer on the way can carry, each as one call of a batch on
real workers: that call ends `invalid_arguments`, the rest of the batch runs,
and the refused arguments go neither to Redis nor whole into the ledger."""

from __future__ import annotations

from runtime.registry.argument_limits import MAX_DEPTH
from runtime.types import Status

WRITES = {"allow": ["bump"]}


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_each_bad_value_ends_only_its_own_call(runtime, workspace):
    (workspace / "a.txt").write_text("hello\n")
    batch = [
        {"id": "surrogate", "name": "read_file", "arguments": {"path": "a\ud800.txt"}},
        {"id": "nan", "name": "nap", "arguments": {"label": "x", "seconds": float("nan")}},
        {"id": "infinity", "name": "bump", "arguments": {"label": float("inf")}},
        {"id": "deep", "name": "bump", "arguments": {"label": nested(10_000)}},
        {"id": "huge", "name": "bump", "arguments": {"label": "x" * (2 << 20)}},
        {"id": "json", "name": "read_file", "arguments": '{"path": "\\ud800"}'},
        {"id": "read", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "write", "name": "bump", "arguments": {"label": "fine"}},
    ]
    handle = runtime.submit(
        batch, mode="auto", workspace=workspace, rules=WRITES, on_error="continue", timeout=30
    )
    results = {result.call_id: result for result in handle.results(timeout=30)}

    expected = {
        "surrogate": "lone surrogate",
        "nan": "JSON cannot carry",
        "infinity": "JSON cannot carry",
        "deep": f"more than {MAX_DEPTH}",
        "huge": "past the bound of 1,048,576",
        "json": "lone surrogate",
    }
    for call_id, said in expected.items():
        assert results[call_id].status is Status.invalid_arguments, results[call_id]
        assert said in results[call_id].model_message
    assert results["read"].ok and "hello" in results["read"].content["text"]
    assert results["write"].ok
    rows = {row.call_id: row for row in runtime.ledger.calls(handle.batch_id)}
    assert rows["huge"].arguments == {"not_stored": expected_note(results["huge"])}
    assert {rows[c].status for c in expected} == {"invalid_arguments"}


def expected_note(result) -> str:
    return result.model_message.split("invalid arguments: ", 1)[1]


LONE = "\ud800"


def test_a_lone_surrogate_anywhere_else_in_a_submit_is_refused_before_anything_is_written(
    runtime, workspace
):
    """Issue 40, through the Python client on real workers: a lone surrogate in
    a call id or a tool name (which signing and the ledger cannot encode), a
    submit key, a conversation or a rule is an `InvalidBatch` naming what holds
    it, and the runtime goes on submitting."""
    import pytest

    from runtime.errors import InvalidBatch

    read = {"id": "r", "name": "read_file", "arguments": {"path": "a.txt"}}
    (workspace / "a.txt").write_text("hello\n")
    cases = [
        ("the id of call 0", [{**read, "id": f"r{LONE}"}], {}),
        ("the tool name of call 0", [{**read, "name": f"read{LONE}"}], {}),
        ("the submit key", [read], {"key": f"k{LONE}"}),
        ("conversation", [read], {"conversation": f"c{LONE}"}),
        ("a deny rule", [read], {"rules": {"deny": [f"read_file({LONE})"]}}),
    ]
    for said, calls, extra in cases:
        with pytest.raises(InvalidBatch, match=f"{said} holds a lone surrogate"):
            runtime.submit(calls, mode="auto", workspace=workspace, **extra)
    handle = runtime.submit([read], mode="auto", workspace=workspace)
    assert handle.results(timeout=30)[0].ok
