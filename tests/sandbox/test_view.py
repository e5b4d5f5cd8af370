"""What a sandboxed process sees of the host (`runtime/sandbox/view.py`), read
from bubblewrap's options, and checked inside a real sandbox."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import runtime.tools  # noqa: F401  (registers the built-ins)
from runtime.registry.capabilities import ToolContext, registry
from runtime.sandbox import view


def pairs(options: list[str], flag: str) -> list[str]:
    return [options[i + 1] for i, option in enumerate(options) if option == flag]


def run(workspace: Path, command: str) -> dict:
    spec = registry.get("shell")
    ctx = ToolContext(workspace=workspace, batch_id="b", call_id="c")
    return spec.execute(spec.input_model(command=command), ctx).content


def test_the_workspace_is_the_one_writable_bind(tmp_path):
    options = view.options(tmp_path, tmp_path)
    assert pairs(options, "--bind") == [str(tmp_path)]
    assert "/usr" in pairs(options, "--ro-bind")
    assert options[-2:] == ["--chdir", str(tmp_path)]


def test_toolrun_state_in_the_workspace_is_hidden(tmp_path, monkeypatch):
    (tmp_path / ".toolrun").mkdir()
    home = tmp_path / "state"
    home.mkdir()
    monkeypatch.setenv("TOOLRUN_HOME", str(home))
    hidden = pairs(view.options(tmp_path, tmp_path), "--tmpfs")
    assert str(tmp_path / ".toolrun") in hidden and str(home) in hidden


def test_a_home_that_holds_the_workspace_is_not_hidden(tmp_path, monkeypatch):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    monkeypatch.setenv("TOOLRUN_HOME", str(tmp_path))
    assert str(tmp_path) not in pairs(view.options(workspace, workspace), "--tmpfs")


def test_files_that_run_code_are_read_only_when_they_exist(tmp_path):
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / ".bashrc").write_text("")
    read_only = pairs(view.options(tmp_path, tmp_path), "--ro-bind")
    for name in (".git/config", ".git/hooks", ".bashrc"):
        assert str(tmp_path / name) in read_only
    assert str(tmp_path / ".gitmodules") not in read_only


def test_a_linked_config_is_read_only_where_it_leads_in_the_workspace(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "cfg").write_text("[core]\n")
    (tmp_path / ".git" / "config").symlink_to(tmp_path / "cfg")
    assert str(tmp_path / "cfg") in pairs(view.options(tmp_path, tmp_path), "--ro-bind")


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's")
def test_inside_the_hooks_and_config_cannot_be_changed_and_secrets_are_hidden(tmp_path):
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("[core]\n")
    out = run(
        tmp_path,
        "echo evil >> .git/config; touch .git/hooks/pre-commit; touch kept; "
        "cat /etc/shadow 2>/dev/null | wc -c; ls /etc/ssh | wc -l; id -u; echo $HOME",
    )
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"
    assert not (tmp_path / ".git" / "hooks" / "pre-commit").exists()
    assert (tmp_path / "kept").exists()
    lines = out["stdout"].split()
    assert lines[-2:] == ["65534", view.HOME]
    assert lines[-4:-2] == ["0", "0"]  # /etc/shadow and /etc/ssh: empty
    assert "Read-only file system" in out["stderr"]
