"""A batch's effective policy from the settings files of each level: which
rules count, who trusts the workspace, and loud errors naming the file."""

from __future__ import annotations

import json
import re

import pytest

from runtime.errors import ConfigurationError
from runtime.gate.decision import Effect
from runtime.gate.policy import PROJECT_FILE, Policy, PolicySources
from runtime.gate.rules import Level
from runtime.settings import Settings


def write(path, data) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.fixture
def files(tmp_path):
    """An empty user file and no org file; a workspace with a project file."""
    workspace = tmp_path / "ws"
    write(
        workspace / PROJECT_FILE,
        {"permissions": {"allow": ["write_file"], "deny": ["shell(rm *)"]}},
    )
    return tmp_path, workspace


def sources(tmp_path, *, user=None, org=None) -> PolicySources:
    user_file = write(tmp_path / "user.json", user) if user is not None else tmp_path / "none"
    org_file = write(tmp_path / "org.json", org) if org is not None else None
    return PolicySources(
        Settings(home=tmp_path, user_settings_file=user_file, policy_file=org_file)
    )


def texts(policy: Policy) -> list[tuple[str, str, str]]:
    return [(r.level.name, r.effect.value, r.text) for r in policy.rules]


def test_an_untrusted_project_may_restrict_but_not_grant(files):
    tmp_path, workspace = files
    policy = sources(tmp_path).policy_for(workspace)
    assert not policy.trusted
    assert texts(policy) == [("project", "deny", "shell(rm *)")]


def test_a_workspace_the_user_trusts_counts_its_project_allows_and_its_subfolders_too(files):
    tmp_path, workspace = files
    trusting = sources(tmp_path, user={"trusted_workspaces": [str(tmp_path)]})
    policy = trusting.policy_for(workspace)
    assert policy.trusted and ("project", "allow", "write_file") in texts(policy)


def test_rules_of_every_level_in_order_with_the_batch_s_own_last(files):
    tmp_path, workspace = files
    policy = sources(
        tmp_path,
        org={"permissions": {"deny": ["http_get"]}, "trusted_workspaces": [str(workspace)]},
        user={"permissions": {"ask": ["edit_file"]}},
    ).policy_for(workspace, {"allow": ["shell(git diff *)"]})
    assert [r.level for r in policy.rules] == [
        Level.org,
        Level.project,
        Level.project,
        Level.user,
        Level.batch,
    ]
    assert policy.rules[-1].effect is Effect.allow and policy.rules[-1].source == "submit"


def test_the_version_names_the_effective_rules(files):
    tmp_path, workspace = files
    policies = sources(tmp_path)
    same = policies.policy_for(workspace).version
    assert policies.policy_for(workspace).version == same
    assert policies.policy_for(workspace, {"deny": ["shell"]}).version != same


def test_a_snapshot_is_the_policy_the_worker_checks_against(files):
    tmp_path, workspace = files
    policy = sources(tmp_path, org={"workspace_roots": [str(tmp_path)]}).policy_for(workspace)
    assert Policy.from_snapshot(json.loads(json.dumps(policy.snapshot()))) == policy


def test_the_org_names_the_internal_hosts_a_batch_may_reach(files):
    tmp_path, workspace = files
    plain = sources(tmp_path).policy_for(workspace)
    org = {"internal_hosts": ["127.0.0.1", "10.2.0.0/16", "db.internal", "*.corp.example"]}
    policy = sources(tmp_path, org=org).policy_for(workspace)
    assert plain.internal_hosts == () and "internal_hosts" not in plain.snapshot()
    assert policy.internal_hosts == tuple(org["internal_hosts"])
    assert policy.version != plain.version
    assert Policy.from_snapshot(json.loads(json.dumps(policy.snapshot()))) == policy


def test_only_the_org_turns_the_sandbox_off_and_the_snapshot_carries_it(files):
    tmp_path, workspace = files
    plain = sources(tmp_path).policy_for(workspace)
    off = sources(tmp_path, org={"sandbox": {"enabled": False}}).policy_for(workspace)
    assert plain.sandbox is None and "sandbox" not in plain.snapshot()
    assert off.snapshot()["sandbox"] == {"enabled": False} and off.version != plain.version
    assert Policy.from_snapshot(json.loads(json.dumps(off.snapshot()))) == off


def test_the_org_lists_the_hosts_sandboxed_processes_reach_and_the_snapshot_carries_them(files):
    tmp_path, workspace = files
    box = {"network": {"allow": ["pypi.org", "*.npmjs.org", "10.2.0.0/16"]}}
    policy = sources(tmp_path, org={"sandbox": box}).policy_for(workspace)
    assert policy.snapshot()["sandbox"] == box
    assert policy.version != sources(tmp_path).policy_for(workspace).version
    assert Policy.from_snapshot(json.loads(json.dumps(policy.snapshot()))) == policy


@pytest.mark.parametrize(
    ("level", "data", "says"),
    [
        ("user", {"workspace_roots": ["/srv"]}, "unknown key(s) ['workspace_roots']"),
        ("user", {"permissions": {"allow": ["write_file("]}}, "invalid allow rule"),
        ("user", {"permissions": {"grant": []}}, "unknown permissions key(s) ['grant']"),
        ("org", "{not json", "not valid JSON"),
        ("org", ["a list"], "must be a JSON object"),
        ("org", {"trusted_workspaces": "~/src"}, "must be a list of directory paths"),
        ("org", {"internal_hosts": "10.0.0.0/8"}, "internal_hosts must be a list"),
        ("org", {"internal_hosts": ["10.0.0.1/8"]}, "entry '10.0.0.1/8'"),
        ("org", {"internal_hosts": ["db internal"]}, "entry 'db internal'"),
        ("org", {"internal_hosts": ["300.1.1.1"]}, "entry '300.1.1.1'"),
        ("user", {"internal_hosts": ["10.0.0.0/8"]}, "unknown key(s) ['internal_hosts']"),
        ("org", {"sandbox": False}, 'sandbox must be {"enabled": true|false'),
        ("org", {"sandbox": {"enabled": "no"}}, 'sandbox must be {"enabled": true|false'),
        ("org", {"sandbox": {"net": {}}}, 'sandbox must be {"enabled": true|false'),
        ("org", {"sandbox": {"network": ["pypi.org"]}}, 'sandbox.network must be {"allow"'),
        ("org", {"sandbox": {"network": {"deny": []}}}, 'sandbox.network must be {"allow"'),
        ("org", {"sandbox": {"network": {"allow": "pypi.org"}}}, "allow must be a list"),
        ("org", {"sandbox": {"network": {"allow": ["py pi"]}}}, "allow entry 'py pi'"),
        ("user", {"sandbox": {"enabled": False}}, "unknown key(s) ['sandbox']"),
    ],
)
def test_a_bad_settings_file_is_an_error_naming_it(tmp_path, level, data, says):
    with pytest.raises(ConfigurationError, match=r"(?s)" + level + r"\.json.*" + re.escape(says)):
        sources(tmp_path, **{level: data})


def test_a_missing_org_file_is_an_error_and_a_missing_user_file_is_not(tmp_path):
    with pytest.raises(ConfigurationError, match="org policy file does not exist"):
        PolicySources(Settings(home=tmp_path, policy_file=tmp_path / "nope.json"))
    assert sources(tmp_path).user == {}
