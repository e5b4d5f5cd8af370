"""`search_files` with no path in a checkout whose `.gitignore` leaves out a
large `.venv`, run by a real worker of the session's stack: the ignored files
are neither searched nor shown, and the search ends well within its timeout."""

from __future__ import annotations

import json

from runtime.types import Status

IGNORED_FILES = 6000


def test_a_search_with_no_path_does_not_walk_what_gitignore_ignores(runtime, workspace):
    (workspace / ".gitignore").write_text(".venv/\n*.log\n")
    (workspace / "app.py").write_text("NEEDLE = 1\n")
    (workspace / "debug.log").write_text("NEEDLE in a log\n")
    for index in range(IGNORED_FILES):
        folder = workspace / ".venv" / "lib" / f"pkg{index // 200}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{index}.py").write_text("NEEDLE = 2\n")
    call = {"id": "s1", "name": "search_files", "arguments": {"pattern": "NEEDLE"}}
    [result] = runtime.submit([call], mode="auto", workspace=workspace).results(timeout=120)
    assert result.status is Status.ok, result.model_message
    content = result.content if isinstance(result.content, dict) else json.loads(result.content)
    assert [match["path"] for match in content["matches"]] == ["app.py"]
    assert content["files_searched"] == 2  # app.py and .gitignore, nothing under .venv
    assert content["truncated"] is False
