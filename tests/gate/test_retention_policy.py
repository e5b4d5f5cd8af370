"""The org policy file's `retention`: only the org file names it, a bad one is
an error naming the file and the key, and when set it wins whole over the
deployment's `TOOLRUN_RETENTION_*` (docs/architecture.md, "Retention")."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runtime.errors import ConfigurationError
from runtime.gate.policy import PROJECT_FILE, PolicySources, org_retention
from runtime.gate.retention_policy import DEPLOYMENT, Retention
from runtime.settings import Settings

ARCHIVE = "/var/lib/toolrun/archive"


def org(tmp_path: Path, data, **settings) -> Settings:
    path = tmp_path / "org.json"
    path.write_text(json.dumps(data))
    return Settings(home=tmp_path, policy_file=path, **settings)


def test_the_org_file_sets_the_period_and_where_transcripts_go(tmp_path):
    settings = org(tmp_path, {"retention": {"days": 90, "export": ARCHIVE}})
    assert org_retention(settings) == Retention(90.0, Path(ARCHIVE), str(tmp_path / "org.json"))
    assert org_retention(org(tmp_path, {"retention": {"days": 0.5}})).export is None


def test_without_it_the_deployment_decides_and_with_it_the_org_file_wins_whole(tmp_path):
    kept = tmp_path / "kept"
    deployment = {"retention_days": 7, "retention_export": kept}
    assert org_retention(Settings(home=tmp_path, **deployment)) == Retention(7, kept)
    assert org_retention(org(tmp_path, {}, **deployment)) == Retention(7, kept, DEPLOYMENT)
    assert org_retention(Settings(home=tmp_path)) == Retention(None, None)

    chosen = org_retention(org(tmp_path, {"retention": {"days": 30}}, **deployment))
    assert (chosen.days, chosen.export) == (30, None)  # no archive outlives the org's period
    assert chosen.overrides(Settings(home=tmp_path, **deployment))
    assert not chosen.overrides(Settings(home=tmp_path))
    assert not chosen.overrides(Settings(home=tmp_path, retention_days=30))


@pytest.mark.parametrize(
    ("retention", "says"),
    [
        (90, 'retention must be {"days": N, "export": "/directory"}'),
        ({"export": ARCHIVE}, "retention.days must be a positive number of days"),
        ({"days": 0}, "retention.days must be a positive number of days"),
        ({"days": -3}, "retention.days must be a positive number of days"),
        ({"days": "90"}, "retention.days must be a positive number of days"),
        ({"days": True}, "retention.days must be a positive number of days"),
        ({"days": 90, "export": 7}, "retention.export must be a directory path"),
        ({"days": 90, "export": " "}, "retention.export must be a directory path"),
        ({"days": 90, "export": "archive"}, "retention.export must be an absolute path"),
        ({"days": 90, "keep": "all"}, "retention: unknown key(s) ['keep']"),
    ],
)
def test_a_bad_retention_is_an_error_naming_the_file_and_the_key(tmp_path, retention, says):
    settings = org(tmp_path, {"retention": retention})
    for reading in (org_retention, PolicySources):  # a worker, a submitter
        with pytest.raises(ConfigurationError, match=r"org\.json: .*" + re.escape(says)):
            reading(settings)


def test_a_user_or_project_file_may_not_name_it(tmp_path):
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"retention": {"days": 1}}))
    with pytest.raises(ConfigurationError, match=r"user\.json: unknown key\(s\) \['retention'\]"):
        PolicySources(Settings(home=tmp_path, user_settings_file=user))

    workspace = tmp_path / "ws"
    (workspace / PROJECT_FILE).parent.mkdir(parents=True)
    (workspace / PROJECT_FILE).write_text(json.dumps({"retention": {"days": 1}}))
    sources = PolicySources(Settings(home=tmp_path, user_settings_file=tmp_path / "none"))
    with pytest.raises(ConfigurationError, match=r"settings\.json: unknown key\(s\) \['retention'"):
        sources.policy_for(workspace)
