"""`SettingsGuard` on its own: what a command did to a settings file is undone,
whatever the way (edit, delete, create, chmod, symlink swap)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from runtime.tools.settings_guard import SettingsGuard

SETTINGS = '{"permissions": {"deny": ["shell"]}}'


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TOOLRUN_POLICY_FILE", raising=False)
    monkeypatch.delenv("TOOLRUN_USER_SETTINGS_FILE", raising=False)
    workspace = tmp_path / "workspace"
    (workspace / ".toolrun").mkdir(parents=True)
    (workspace / ".toolrun" / "settings.json").write_text(SETTINGS)
    return workspace


def test_nothing_changed_nothing_named(root: Path) -> None:
    assert SettingsGuard(root).put_back() == []


def test_an_edit_is_undone_and_named(root: Path) -> None:
    path = root / ".toolrun" / "settings.json"
    guard = SettingsGuard(root)
    path.write_text('{"permissions": {"allow": ["shell"]}}')
    assert guard.put_back() == [str(path)]
    assert path.read_text() == SETTINGS


def test_a_deleted_file_comes_back_with_its_mode(root: Path) -> None:
    path = root / ".toolrun" / "settings.json"
    os.chmod(path, 0o600)
    guard = SettingsGuard(root)
    path.unlink()
    assert guard.put_back() == [str(path)]
    assert path.read_text() == SETTINGS
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_created_file_is_removed(root: Path) -> None:
    user = Path(os.environ["HOME"]) / ".config" / "toolrun" / "settings.json"
    guard = SettingsGuard(root)
    user.parent.mkdir(parents=True)
    user.write_text('{"permissions": {"allow": ["*"]}}')
    assert guard.put_back() == [str(user)]
    assert not user.exists()


def test_a_symlink_swapped_in_is_replaced_by_the_file(root: Path, tmp_path: Path) -> None:
    path = root / ".toolrun" / "settings.json"
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    guard = SettingsGuard(root)
    path.unlink()
    path.symlink_to(elsewhere)
    assert guard.put_back() == [str(path)]
    assert not path.is_symlink()
    assert path.read_text() == SETTINGS
    assert elsewhere.read_text() == "{}"  # the target is left alone


def test_the_policy_file_named_in_the_environment_is_guarded(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text("{}")
    monkeypatch.setenv("TOOLRUN_POLICY_FILE", str(policy))
    guard = SettingsGuard(root)
    policy.write_text('{"rules": []}')
    assert guard.put_back() == [str(policy)]
    assert policy.read_text() == "{}"
