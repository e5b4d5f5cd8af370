"""A command hook's exit codes, as Claude Code's hooks mean them, its timeout
and its environment: 0 parses stdout, 2 blocks with stderr as the reason, any
other code is a non-blocking error; the cluster's secrets stay out."""

from __future__ import annotations

import json
import sys

import pytest

from runtime.errors import HookFailed
from runtime.gate.hooks import command_hook
from runtime.gate.hooks.declaration import Hook


def script(code: str, when: str = "pre", timeout: float = 10.0) -> Hook:
    argv = (sys.executable, "-c", code)
    return Hook("cmd", when, "command", argv, "org", "org.json", timeout=timeout)


def test_exit_0_answers_with_stdout_and_sees_the_request_on_stdin(tmp_path):
    code = "import json,sys; r=json.load(sys.stdin); print(json.dumps({'reason': r['tool']}))"
    answer = command_hook.ask(script(code), {"tool": "echo", "workspace": str(tmp_path)}, b"")
    assert answer == {"reason": "echo"}


def test_exit_0_with_nothing_on_stdout_is_no_opinion():
    assert command_hook.ask(script("pass"), {}, b"") is None


def test_exit_2_blocks_with_stderr_as_the_reason():
    code = "import sys; print('too risky', file=sys.stderr); sys.exit(2)"
    assert command_hook.ask(script(code), {}, b"") == {"decision": "deny", "reason": "too risky"}
    assert command_hook.ask(script(code, "post"), {}, b"") == {"note": "too risky"}


def test_another_exit_is_a_non_blocking_error():
    with pytest.raises(HookFailed, match="exited with 3: oops") as error:
        command_hook.ask(script("import sys; sys.stderr.write('oops'); sys.exit(3)"), {}, b"")
    assert error.value.non_blocking


def test_a_command_past_its_timeout_is_killed():
    with pytest.raises(HookFailed, match="no answer within 0.5 s") as error:
        command_hook.ask(script("import time; time.sleep(30)", timeout=0.5), {}, b"")
    assert not error.value.non_blocking


def test_the_environment_is_an_allowlist(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLRUN_SIGNING_KEY", "s3cret")
    code = "import json,os; print(json.dumps({'reason': json.dumps(sorted(os.environ))}))"
    answer = command_hook.ask(script(code), {"workspace": str(tmp_path)}, b"")
    names = json.loads(answer["reason"])
    assert "TOOLRUN_SIGNING_KEY" not in names and "HOOK_NAME" in names


def test_a_command_that_cannot_start_fails():
    hook = Hook("cmd", "pre", "command", ("/no/such/program",), "org", "org.json")
    with pytest.raises(HookFailed, match="could not start"):
        command_hook.ask(hook, {}, b"")
