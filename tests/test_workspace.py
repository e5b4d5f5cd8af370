"""resolve_inside: every path a tool touches stays inside the workspace; and a file
with several hard links is refused, since another link may be outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.errors import PathOutsideWorkspace, ToolError
from runtime.types import Status
from runtime.workspace import refuse_hard_link, relative_name, resolve_inside


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("print(1)\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return root


def test_relative_path_resolves_inside(ws: Path) -> None:
    assert resolve_inside(ws, "src/a.py") == ws.resolve() / "src" / "a.py"


def test_dot_is_the_workspace_root(ws: Path) -> None:
    assert resolve_inside(ws, ".") == ws.resolve()


def test_missing_file_inside_is_allowed(ws: Path) -> None:
    assert resolve_inside(ws, "new/dir/file.txt") == ws.resolve() / "new" / "dir" / "file.txt"


def test_absolute_path_inside_is_allowed(ws: Path) -> None:
    assert resolve_inside(ws, str(ws / "src" / "a.py")) == ws.resolve() / "src" / "a.py"


def test_dotdot_that_stays_inside_is_allowed(ws: Path) -> None:
    assert resolve_inside(ws, "src/../src/a.py") == ws.resolve() / "src" / "a.py"


@pytest.mark.parametrize(
    "path",
    [
        "../x",
        "src/../../x",
        "/etc/passwd",
        "~/.ssh/id_rsa",
        "~",
        "~root/x",
        "a\x00b",
        "",
        "   ",
        "../outside/secret.txt",
        "../ws-evil/x",
    ],
)
def test_escapes_are_refused(ws: Path, path: str) -> None:
    (ws.parent / "ws-evil").mkdir()
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(ws, path)


def test_symlink_to_outside_file_is_refused(ws: Path) -> None:
    (ws / "link").symlink_to(ws.parent / "outside" / "secret.txt")
    with pytest.raises(PathOutsideWorkspace, match="outside the workspace"):
        resolve_inside(ws, "link")


def test_path_through_symlinked_directory_outside_is_refused(ws: Path) -> None:
    (ws / "dirlink").symlink_to(ws.parent / "outside", target_is_directory=True)
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(ws, "dirlink/secret.txt")
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(ws, "dirlink/not-yet-there.txt")


def test_dangling_symlink_to_outside_is_refused(ws: Path) -> None:
    (ws / "dangling").symlink_to(ws.parent / "outside" / "does-not-exist")
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(ws, "dangling")


def test_symlink_inside_resolves_to_its_target(ws: Path) -> None:
    (ws / "alias.py").symlink_to(ws / "src" / "a.py")
    assert resolve_inside(ws, "alias.py") == ws.resolve() / "src" / "a.py"


def test_symlink_loop_is_refused_not_raised_as_runtime_error(ws: Path) -> None:
    (ws / "loop_a").symlink_to(ws / "loop_b")
    (ws / "loop_b").symlink_to(ws / "loop_a")
    with pytest.raises(PathOutsideWorkspace, match="symlink loop"):
        resolve_inside(ws, "loop_a")
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(ws, "loop_a/file.txt")


def test_workspace_given_through_a_symlink(ws: Path) -> None:
    alias = ws.parent / "ws-alias"
    alias.symlink_to(ws, target_is_directory=True)
    assert resolve_inside(alias, "src/a.py") == ws.resolve() / "src" / "a.py"
    assert resolve_inside(alias, str(alias / "src" / "a.py")) == ws.resolve() / "src" / "a.py"
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(alias, "../outside/secret.txt")


def test_relative_workspace_path(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ws.parent)
    assert resolve_inside("ws", "src/a.py") == ws.resolve() / "src" / "a.py"


def test_refusal_is_a_denied_tool_error(ws: Path) -> None:
    with pytest.raises(ToolError) as caught:
        resolve_inside(ws, "../x")
    assert caught.value.status is Status.denied
    assert "../x" in str(caught.value)


def test_relative_name(ws: Path) -> None:
    root = ws.resolve()
    assert relative_name(ws, root) == "."
    assert relative_name(ws, root / "src" / "a.py") == os.path.join("src", "a.py")


def test_a_file_with_one_link_passes_and_a_second_link_is_refused(ws: Path) -> None:
    a = ws / "src" / "a.py"
    refuse_hard_link(a.stat(), "src/a.py")
    (ws / "src").joinpath("b.py").hardlink_to(a)
    with pytest.raises(PathOutsideWorkspace, match="src/a.py has 2 hard links") as refused:
        refuse_hard_link(a.stat(), "src/a.py")
    assert refused.value.status is Status.denied


def test_a_directory_has_many_links_and_passes(ws: Path) -> None:
    (ws / "src" / "sub").mkdir()
    assert (ws / "src").stat().st_nlink > 1
    refuse_hard_link((ws / "src").stat(), "src")
