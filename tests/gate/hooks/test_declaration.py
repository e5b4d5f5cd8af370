"""Policy hooks as the settings files declare them: which levels count (a
project's only in a trusted workspace), loud errors naming the file and the
entry, and the signed snapshot that carries them to the worker."""

from __future__ import annotations

import pytest

from runtime.errors import ConfigurationError
from runtime.gate.hooks.declaration import Hook, read
from runtime.gate.policy import PROJECT_FILE, Policy
from runtime.gate.rules import Level
from tests.gate.test_policy import sources, write

PRE = {"name": "gate", "when": "pre", "kind": "python", "callable": "acme.hooks:check"}
POST = {
    "name": "lint",
    "when": "post",
    "kind": "command",
    "command": ["./lint.sh"],
    "tools": ["w*"],
}


def test_a_hook_reads_with_its_defaults():
    (hook,) = read({"hooks": [PRE]}, "org.json", Level.org)
    assert (hook.timeout, hook.on_failure, hook.redact, hook.tools) == (5.0, "closed", True, ())
    assert hook.org and hook.sees("anything") and hook.source == "org.json"


def test_tools_narrow_what_a_hook_sees():
    (hook,) = read({"hooks": [POST]}, "user.json", Level.user)
    assert hook.sees("write_file") and not hook.sees("read_file") and not hook.org
    assert hook.target == ("./lint.sh",)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({**PRE, "when": "during"}, "when must be pre or post"),
        ({**PRE, "kind": "opa"}, "kind must be one of"),
        ({**PRE, "callable": "no_colon"}, "package.module:function"),
        ({**PRE, "url": "https://x"}, "a python hook has no ['url']"),
        ({**PRE, "timeout": 0}, "timeout must be above 0"),
        ({**PRE, "timeout": True}, "timeout must be a number"),
        ({**PRE, "on_failure": "maybe"}, "on_failure must be closed or open"),
        ({**PRE, "redact": "no"}, "redact must be true or false"),
        ({**PRE, "tools": "shell"}, "tools must be a list"),
        ({**PRE, "colour": "red"}, "unknown key(s) ['colour']"),
        ({"name": "h", "when": "pre", "kind": "http", "url": "ftp://x"}, "http:// or https://"),
        ({"name": "h", "when": "pre", "kind": "command", "command": []}, "shell command or a list"),
        ({"when": "pre", "kind": "python", "callable": "a:b"}, "name must be a non-empty"),
    ],
)
def test_a_malformed_hook_is_an_error_naming_the_file_and_entry(entry, says):
    with pytest.raises(ConfigurationError, match=r"org\.json: hooks\[0\]") as error:
        read({"hooks": [entry]}, "org.json", Level.org)
    assert says in str(error.value)


def test_two_hooks_may_not_share_a_name():
    with pytest.raises(ConfigurationError, match="share a name"):
        read({"hooks": [PRE, {**POST, "name": "gate"}]}, "org.json", Level.org)


def test_every_level_declares_hooks_and_a_project_s_count_only_when_trusted(tmp_path):
    workspace = tmp_path / "ws"
    write(workspace / PROJECT_FILE, {"hooks": [{**POST, "name": "repo"}]})
    found = sources(tmp_path, org={"hooks": [PRE]}, user={"hooks": [POST]})
    untrusted = found.policy_for(workspace)
    assert [(h.name, h.level) for h in untrusted.hooks] == [("gate", "org"), ("lint", "user")]
    trusting = sources(
        tmp_path,
        org={"hooks": [PRE]},
        user={"hooks": [POST], "trusted_workspaces": [str(workspace)]},
    )
    trusted = trusting.policy_for(workspace)
    assert [h.name for h in trusted.hooks] == ["gate", "repo", "lint"]
    assert trusted.hooks[1].level == "project"
    assert trusted.version != untrusted.version


def test_the_snapshot_carries_the_hooks_to_the_worker(tmp_path):
    policy = sources(tmp_path, org={"hooks": [PRE, POST]}).policy_for(tmp_path)
    again = Policy.from_snapshot(policy.snapshot())
    assert again.hooks == policy.hooks
    assert Hook.from_dict(policy.hooks[1].as_dict()).target == ("./lint.sh",)


def test_the_submitter_is_known_to_the_hooks_and_not_to_the_snapshot(tmp_path):
    policy = sources(tmp_path).policy_for(tmp_path).counted_for("ana")
    assert policy.submitter == "ana" and "ana" not in str(policy.snapshot())
