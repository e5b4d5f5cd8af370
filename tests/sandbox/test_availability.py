"""Whether the sandbox can be had (`runtime/sandbox/availability.py`) and what a
call that needs it is told when it cannot (`runtime.sandbox.confine`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import SandboxUnavailable
from runtime.sandbox import availability, confine, enabled_by
from runtime.settings import Settings


def test_a_bwrap_that_fails_its_check_is_unavailable_and_says_why():
    state = availability(Path("/bin/false"))
    assert not state.ok and "/bin/false failed its check" in state.reason
    assert state.describe().startswith("UNAVAILABLE")


def test_a_missing_bwrap_is_unavailable():
    state = availability(Path("/nonexistent/bwrap"))
    assert not state.ok and "could not run" in state.reason


def test_a_call_gets_a_model_readable_error_and_nothing_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLRUN_BWRAP", "/bin/false")
    with pytest.raises(SandboxUnavailable) as caught:
        confine(["touch", "x"], confined=True, workspace=tmp_path, env={})
    assert caught.value.kind == "sandbox_unavailable"
    message = str(caught.value)
    assert "Nothing was run" in message and "bubblewrap" in message and "enabled" in message


def test_unconfined_is_the_command_as_it_is_noted():
    noted: list[str] = []
    argv = confine(["true"], confined=False, workspace=Path("/"), env={}, noted=noted)
    assert argv == ["true"] and noted == ["true"]


def test_only_an_explicit_false_in_the_policy_turns_it_off():
    assert enabled_by({}) and enabled_by({"sandbox": None}) and enabled_by({"sandbox": {}})
    assert not enabled_by({"sandbox": {"enabled": False}})
    assert Settings().sandbox is True
