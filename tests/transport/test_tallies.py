"""The fields one end adds to the cluster's tallies (runtime/transport/tallies.py)."""

from __future__ import annotations

from runtime.transport.tallies import UNKNOWN_TOOL, fields
from runtime.types import Status, ToolResult


def _end(tool: str, status: Status, duration_ms: float = 0.0) -> ToolResult:
    return ToolResult(
        call_id="c", tool=tool, status=status, model_message="", summary="", duration_ms=duration_ms
    )


def test_every_unknown_tool_is_tallied_under_one_name():
    assert fields(_end("made-up-name", Status.unknown_tool))[0] == f"{UNKNOWN_TOOL}\nunknown_tool"
    counted, bucket, total, seconds = fields(_end("read_file", Status.ok, 20))
    assert (counted, bucket, total, seconds) == (
        "read_file\nok",
        "read_file\n0.025",
        "read_file\nsum",
        0.02,
    )
