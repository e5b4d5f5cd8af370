"""delete_cache: deletes exactly one named cache and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

import runtime.tools  # noqa: F401  (registers the built-ins)
from runtime.errors import ToolError
from runtime.registry.capabilities import ToolContext, ToolOutput, registry
from runtime.types import Risk


def delete(workspace: Path, scope: str) -> ToolOutput:
    spec = registry.get("delete_cache")
    ctx = ToolContext(workspace=workspace, batch_id="b", call_id="c")
    return spec.execute(spec.input_model(scope=scope), ctx)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    cache = root / ".toolrun" / "cache"
    (cache / "pip" / "wheels").mkdir(parents=True)
    (cache / "pip" / "index.json").write_text("{}")
    (cache / "pip" / "wheels" / "a.whl").write_bytes(b"PK")
    (cache / "npm").mkdir()
    (cache / "npm" / "package.tgz").write_bytes(b"x")
    (root / ".toolrun" / "settings.json").write_text("{}\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    (cache / "pip" / "out_link").symlink_to(outside / "keep.txt")
    (cache / "pip" / "out_dir").symlink_to(outside, target_is_directory=True)
    return root


def test_spec_is_destructive() -> None:
    spec = registry.get("delete_cache")
    assert spec.risk is Risk.destructive and spec.description
    assert "description" in spec.input_model.model_json_schema()["properties"]["scope"]


def test_deletes_only_the_named_cache(ws: Path) -> None:
    out = delete(ws, "pip")
    assert out.content == {"scope": "pip", "files_deleted": 4}
    cache = ws / ".toolrun" / "cache"
    assert not (cache / "pip").exists()
    assert (cache / "npm" / "package.tgz").read_bytes() == b"x"
    assert (ws / ".toolrun" / "settings.json").read_text() == "{}\n"
    outside = ws.parent / "outside"
    assert (outside / "keep.txt").read_text() == "keep\n"  # symlinks were not followed
    assert "pip" in out.message and "4 files" in out.summary


@pytest.mark.parametrize(
    "scope", ["", "*", "..", ".", "a/b", "../npm", "pip/..", "PIP", "-x", "pip\n", "x" * 65]
)
def test_bad_scopes_are_refused_with_the_existing_names(ws: Path, scope: str) -> None:
    with pytest.raises(ToolError, match="existing caches: npm, pip"):
        delete(ws, scope)
    assert (ws / ".toolrun" / "cache" / "pip" / "index.json").exists()
    assert (ws / ".toolrun" / "cache" / "npm").exists()


def test_unknown_scope_is_refused(ws: Path) -> None:
    with pytest.raises(ToolError, match="no cache named 'cargo'; existing caches: npm, pip"):
        delete(ws, "cargo")


def test_no_caches_at_all(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="existing caches: none"):
        delete(tmp_path, "pip")


def test_symlinked_cache_entry_is_not_a_cache(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("x\n")
    (ws / ".toolrun" / "cache" / "src").symlink_to(ws / "src", target_is_directory=True)
    with pytest.raises(ToolError, match="no cache named 'src'"):
        delete(ws, "src")
    assert (ws / "src" / "main.py").exists()


def test_symlinked_cache_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "data" / "pip").mkdir(parents=True)
    (root / "data" / "pip" / "f").write_text("x")
    (root / ".toolrun").mkdir()
    (root / ".toolrun" / "cache").symlink_to(root / "data", target_is_directory=True)
    with pytest.raises(ToolError, match="symlink"):
        delete(root, "pip")
    assert (root / "data" / "pip" / "f").exists()


def test_scope_that_is_a_file_is_not_a_cache(ws: Path) -> None:
    (ws / ".toolrun" / "cache" / "stray").write_text("x")
    with pytest.raises(ToolError, match="no cache named 'stray'"):
        delete(ws, "stray")
    assert (ws / ".toolrun" / "cache" / "stray").exists()
