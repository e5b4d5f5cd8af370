"""Git's configuration and hooks and shell rc files: named at any depth, in any
case, through the path as spelt or where it resolves."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.gate.protected import protected_file
from runtime.workspace import resolve_inside


def reason(ws: Path, path: str) -> str | None:
    return protected_file(ws.resolve(), path, resolve_inside(ws, path))


@pytest.mark.parametrize(
    ("path", "named"),
    [
        (".git/config", "git's own directory"),
        ("deep/er/.git/hooks/pre-commit", "git's own directory"),
        (".Git/CONFIG", "git's own directory"),
        ("x/.git", "git's own directory"),
        (".gitmodules", "git's configuration (.gitmodules)"),
        (".gitconfig", "git's configuration (.gitconfig)"),
        ("home/.config/git/config", "git's configuration (.config/git/)"),
        (".bashrc", "start-up file (.bashrc)"),
        ("u/.bash_profile", "start-up file (.bash_profile)"),
        ("./.zprofile", "start-up file (.zprofile)"),
        (".login", "start-up file (.login)"),
    ],
)
def test_protected_paths_say_what_they_are(tmp_path, path, named):
    said = reason(tmp_path, path)
    assert said is not None and named in said and repr(path) in said


@pytest.mark.parametrize(
    "path", ["src/config", ".github/x.yml", "git/hooks/x", ".gitignore", "bashrc", ".bashrc.bak"]
)
def test_other_paths_are_not_protected(tmp_path, path):
    assert reason(tmp_path, path) is None


def test_a_symlink_is_judged_where_it_leads(tmp_path):
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / "innocent").symlink_to(tmp_path / ".git" / "hooks", target_is_directory=True)
    (tmp_path / "rc").symlink_to(tmp_path / "home" / ".bashrc")
    assert "git's own directory" in reason(tmp_path, "innocent/pre-push")
    assert "start-up file" in reason(tmp_path, "rc")
    assert "git's own directory" in reason(tmp_path, str(tmp_path / "innocent" / "x"))
