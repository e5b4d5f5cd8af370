"""`toolrun keys create|list|revoke` as a user runs them, on a SQLite ledger."""

from __future__ import annotations

from runtime.gateway.keys import authenticate
from runtime.ledger.keys import Keys
from runtime.ledger.store import Ledger
from tests.support.cli import assert_one_line_error, toolrun, toolrun_env


def test_keys_are_made_listed_and_revoked(tmp_path):
    env = toolrun_env(tmp_path / "home")
    root = tmp_path / "agents"
    root.mkdir()
    made = toolrun(
        "keys",
        "create",
        "ci-bot",
        "--role",
        "submitter",
        "--workspace-root",
        str(root),
        "--max-mode",
        "accept_edits",
        env=env,
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("trk_")
    listed = toolrun("keys", "list", env=env).stdout
    assert "ci-bot" in listed and "submitter" in listed and str(root) in listed
    assert token not in listed
    ledger = Ledger(f"sqlite:///{tmp_path / 'home' / 'ledger.db'}")
    try:
        assert authenticate(Keys(ledger), token).name == "ci-bot"
        assert toolrun("keys", "revoke", "ci-bot", env=env).returncode == 0
        assert authenticate(Keys(ledger), token) is None
    finally:
        ledger.close()
    assert "revoked" in toolrun("keys", "list", env=env).stdout
    assert_one_line_error(toolrun("keys", "revoke", "ci-bot", env=env), "no live key")


def test_bad_key_requests_are_one_line(tmp_path):
    env = toolrun_env(tmp_path / "home")
    assert_one_line_error(toolrun("keys", "create", "x", "--role", "root", env=env), "role")
    assert_one_line_error(
        toolrun("keys", "create", "x", "--role", "submitter", env=env), "workspace-root"
    )
    assert_one_line_error(
        toolrun("keys", "create", "x", "--role", "admin", "--max-mode", "yolo", env=env), "mode"
    )
    assert_one_line_error(
        toolrun(
            "keys",
            "create",
            "x",
            "--role",
            "submitter",
            "--workspace-root",
            str(tmp_path / "missing"),
            env=env,
        ),
        "not a directory",
    )
    assert toolrun("keys", "create", "x", "--role", "admin", env=env).returncode == 0
    assert_one_line_error(toolrun("keys", "create", "x", "--role", "admin", env=env), "exists")


def test_an_empty_or_relative_workspace_root_is_refused(tmp_path):
    """An empty root would be the gateway's working directory, a relative one
    wherever the gateway happens to start."""
    env = toolrun_env(tmp_path / "home")
    (tmp_path / "rel").mkdir()
    for root in ("", "   ", "rel", "."):
        made = toolrun(
            "keys",
            "create",
            "x",
            "--role",
            "submitter",
            "--workspace-root",
            root,
            env=env,
            cwd=tmp_path,
        )
        assert_one_line_error(made, "absolute")
    assert "x" not in toolrun("keys", "list", env=env).stdout
