"""`memory_runtime`: a user's own tools and agent loop, run as a deployment runs
them, in one process without Redis or Celery."""

from __future__ import annotations

import json

import pytest

from runtime import (
    ApprovalRequested,
    ConfigurationError,
    InvalidBatch,
    Registry,
    Risk,
    Status,
    ToolContext,
    ToolError,
    ToolInput,
    ToolOutput,
    memory_runtime,
    tool,
)
from runtime.tools.files_read import read_file

NOTES = Registry()


class Note(ToolInput):
    name: str
    text: str = ""


@tool(risk=Risk.write, paths=("name",), into=NOTES)
def save_note(args: Note, ctx: ToolContext) -> ToolOutput:
    """Save a note in the workspace."""
    ctx.resolve(args.name).write_text(args.text)
    return ToolOutput(content={"saved": args.name}, message=f"saved {args.name}", summary="saved")


@tool(risk=Risk.read, idempotent=True, paths=("name",), into=NOTES)
def read_note(args: Note, ctx: ToolContext) -> str:
    """Read a note of the workspace."""
    path = ctx.resolve(args.name)
    if not path.exists():
        raise ToolError(f"no note {args.name!r}; save it first")
    return path.read_text()


def not_a_tool(args: Note, ctx: ToolContext) -> str:
    return ""


def test_a_batch_runs_the_given_tools_in_the_models_order(tmp_path):
    calls = [
        {"id": "1", "name": "save_note", "arguments": {"name": "a.txt", "text": "hello"}},
        {"id": "2", "name": "read_note", "arguments": {"name": "a.txt"}},
        {"id": "3", "name": "read_note", "arguments": {"name": "b.txt"}},
        {"id": "4", "name": "read_file", "arguments": {"path": "a.txt"}},
    ]
    with memory_runtime(NOTES, workspace=tmp_path) as rt:
        results = rt.submit(calls, mode="accept_edits", workspace=tmp_path).results(timeout=30)
    assert [r.status for r in results] == [Status.ok, Status.ok, Status.error, Status.unknown_tool]
    assert results[1].content == "hello"
    assert "save it first" in results[2].model_message


def test_an_agent_loop_answers_an_approval_and_gets_the_final_result(tmp_path):
    with memory_runtime(NOTES, workspace=tmp_path) as rt:
        handle = rt.submit(
            [{"id": "w", "name": "save_note", "arguments": {"name": "n.txt"}}],
            mode="default",
            workspace=tmp_path,
        )
        seen = []
        for event in handle.stream(timeout=30):
            seen.append(type(event).__name__)
            if isinstance(event, ApprovalRequested):
                assert rt.approve(handle.batch_id, event.call_id, by="test")
            else:
                assert event.status is Status.ok
    assert seen == ["ApprovalRequested", "ToolResult"]
    assert (tmp_path / "n.txt").exists()


def test_only_the_given_workspace_is_trusted(tmp_path):
    """As on a machine nobody has run `toolrun trust` on: an untrusted
    workspace runs reads only, and its project file allows nothing."""
    (tmp_path / ".toolrun").mkdir()
    (tmp_path / ".toolrun" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["save_note"]}})
    )
    call = [{"id": "w", "name": "save_note", "arguments": {"name": "n.txt"}}]
    with memory_runtime(NOTES, workspace=tmp_path) as rt:
        [trusted] = rt.submit(call, mode="default", workspace=tmp_path).results(timeout=30)
    with memory_runtime(NOTES) as rt:
        [untrusted] = rt.submit(call, mode="default", workspace=tmp_path).results(timeout=30)
    assert trusted.status is Status.ok
    assert untrusted.status is Status.denied


def test_tools_given_as_functions_are_the_only_ones_offered(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    calls = [
        {"id": "1", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "2", "name": "list_dir", "arguments": {}},
    ]
    with memory_runtime(read_file) as rt:
        assert rt.registry.names() == ["read_file"]
        results = rt.submit(calls, mode="auto", workspace=tmp_path).results(timeout=30)
    assert [r.status for r in results] == [Status.ok, Status.unknown_tool]


def test_a_function_that_is_not_a_tool_is_refused_at_once():
    with pytest.raises(ConfigurationError, match="decorate it with @tool"):
        with memory_runtime(not_a_tool):
            pass


def test_closing_cancels_what_is_still_waiting(tmp_path):
    with memory_runtime(NOTES, workspace=tmp_path) as rt:
        handle = rt.submit(
            [{"id": "w", "name": "save_note", "arguments": {"name": "n.txt"}}],
            mode="default",
            workspace=tmp_path,
        )
    [result] = handle.results(timeout=30)
    assert result.status is Status.cancelled
    assert not (tmp_path / "n.txt").exists()


def test_the_documented_example_runs_as_written(tmp_path):
    """The tutorial's page on testing tools and agent loops in memory, run here
    too: this tier needs no server process, and neither does the example."""
    import subprocess
    import sys

    from tests.integration.test_readme import REPO, blocks

    text = (REPO / "docs" / "tutorial" / "testing.md").read_text()
    block = next(b for b in blocks(text) if b.language == "python")
    script = tmp_path / "example.py"
    script.write_text(block.code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == block.prints


def test_a_project_s_rate_is_refused_before_anything_runs_in_one_process(tmp_path):
    """The in-process transport holds no rate: a project file that sets one
    gets its batch refused at submit, naming it, rather than run unheld."""
    (tmp_path / ".toolrun").mkdir()
    rate = {"name": "slow", "per": "key", "limit": "1/minute"}
    (tmp_path / ".toolrun" / "settings.json").write_text(json.dumps({"limits": {"rate": [rate]}}))
    call = {"id": "1", "name": "read_note", "arguments": {"name": "a.txt"}}
    with memory_runtime(NOTES, workspace=tmp_path) as rt:
        with pytest.raises(InvalidBatch, match=r"limits.rate \(slow from .*settings.json\)"):
            rt.submit([call], mode="auto", workspace=tmp_path, submitter="tester")
        assert rt.ledger.open_batches("tester") == 0
