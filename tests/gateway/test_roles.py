"""What a key may ask for: roles, modes, workspaces and batch rules."""

from __future__ import annotations

import pytest

from runtime.gateway.keys import Key, Role
from runtime.gateway.problems import Forbidden, Problem
from runtime.gateway.roles import mode_for, require, rules_for, workspace_for
from runtime.types import Mode


def _key(role=Role.submitter, roots=None, max_mode=None):
    return Key(id="0" * 12, name="k", role=role, roots=roots, max_mode=max_mode)


def test_roles_admit_their_own_and_admin_everything():
    require(_key(Role.approver), Role.approver)
    require(_key(Role.admin), Role.approver)
    with pytest.raises(Forbidden, match="submitter key"):
        require(_key(Role.submitter), Role.approver)


def test_a_mode_above_the_maximum_is_refused_and_none_is_the_lower_of_default_and_it():
    key = _key(max_mode=Mode.accept_edits)
    assert mode_for(key, None) is Mode.default
    assert mode_for(key, Mode.plan) is Mode.plan
    assert mode_for(_key(max_mode=Mode.auto), None) is Mode.auto
    assert mode_for(_key(), Mode.bypass) is Mode.bypass
    with pytest.raises(Forbidden, match="up to accept_edits"):
        mode_for(key, Mode.bypass)
    with pytest.raises(Forbidden):
        mode_for(_key(max_mode=Mode.auto), Mode.default)  # default can ask for what auto denies


def test_workspaces_resolve_inside_the_roots(tmp_path):
    inside = tmp_path / "a"
    inside.mkdir()
    (tmp_path / "link").symlink_to("/")
    key = _key(roots=(str(tmp_path),))
    assert workspace_for(key, str(inside)) == str(inside)
    assert workspace_for(key, None) == str(tmp_path)
    for outside in (f"{inside}/../..", str(tmp_path / "link"), "/", str(tmp_path) + "-sibling"):
        with pytest.raises(Forbidden):
            workspace_for(key, outside)
    with pytest.raises(Problem, match="workspace"):
        workspace_for(_key(Role.admin), None)


def test_batch_rules_may_restrict_and_allow_only_what_the_org_allows():
    org = ["write_file(docs/**)"]
    rules_for(_key(), {"deny": ["shell"], "ask": ["http_get"], "allow": org}, org)
    rules_for(_key(Role.admin), {"allow": ["shell"]}, org)
    with pytest.raises(Forbidden, match="shell"):
        rules_for(_key(), {"allow": ["shell"]}, org)
