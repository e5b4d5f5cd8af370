"""Which arguments of an MCP tool the gate treats as paths."""

from __future__ import annotations

import pytest

from runtime.errors import PathOutsideWorkspace
from runtime.mcp.paths import path_fields
from runtime.mcp.schema import input_model
from runtime.workspace import resolve_inside


def fields(properties: dict) -> tuple[str, ...]:
    schema = {"type": "object", "properties": properties}
    return path_fields(input_model("srv__tool", schema), schema)


def test_path_like_arguments_are_found_by_name_or_by_schema():
    assert fields(
        {
            "path": {"type": "string"},
            "paths": {"type": "array", "items": {"type": "string"}},
            "source": {"type": "string"},
            "destination": {"type": "string"},
            "file_path": {"type": "string"},
            "targetDir": {"type": "string"},
            "uri": {"type": "string"},
            "location": {"type": "string", "format": "uri"},
            "anything": {},  # says nothing of its type: counted only by its name (it has none)
        }
    ) == ("path", "paths", "source", "destination", "file_path", "targetDir", "uri", "location")
    assert fields({"query": {"type": "string"}, "limit": {"type": "integer"}}) == ()
    assert fields({"path": {"type": "integer"}}) == ()  # not a string: not a path


def test_a_file_uri_is_a_path_and_any_other_uri_is_refused(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    assert resolve_inside(tmp_path, (tmp_path / "a.txt").as_uri()) == (tmp_path / "a.txt")
    with pytest.raises(PathOutsideWorkspace, match="is a URI, not a file path"):
        resolve_inside(tmp_path, "https://example.com/a.txt")
    with pytest.raises(PathOutsideWorkspace, match="outside the workspace"):
        resolve_inside(tmp_path, "file:///etc/passwd")
