"""The `limits` section of the settings files: rates, concurrency caps, sizes
and fair share read and checked at startup (a bad entry names its file and
itself), and only tightened by the user and project files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.errors import ConfigurationError
from runtime.flow import limits
from runtime.flow.limits import Limits, Rate
from runtime.gate.policy import PolicySources
from runtime.settings import Settings


def sources(tmp_path: Path, org: dict, user: dict | None = None) -> PolicySources:
    org_file, user_file = tmp_path / "org.json", tmp_path / "user.json"
    org_file.write_text(json.dumps(org))
    user_file.write_text(json.dumps(user or {}))
    return PolicySources(
        Settings(home=tmp_path / "home", policy_file=org_file, user_settings_file=user_file)
    )


def test_a_policy_s_limits_reach_the_snapshot_with_the_submitter(tmp_path):
    rate = {"name": "fetch", "per": "host", "tools": ["http_get"], "limit": "5/second"}
    cap = {"name": "shells", "per": "tool", "tools": ["shell"], "max": 2, "on_limit": "refuse"}
    found = sources(tmp_path, {"limits": {"rate": [rate], "concurrency": [cap]}})
    policy = found.policy_for(tmp_path).counted_for("key:ci")
    snap = Limits.from_snapshot(policy.snapshot()["limits"])
    assert snap.principal == "key:ci"
    assert snap.rates[0].source == str(tmp_path / "org.json")
    assert snap.caps[0].on_limit == "refuse" and snap.caps[0].max == 2
    assert snap.windows("http_get", {"url": "https://Example.com/x"})[0][1].endswith(
        "fetch:host:example.com"
    )
    assert snap.windows("read_file", {}) == [] and snap.slots("shell")[0][0].name == "shells"


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ({"rate": [{"name": "r", "per": "key", "limit": "fast"}]}, "limits.rate[0] (r): limit"),
        ({"rate": [{"name": "r", "per": "moon", "limit": "1/s"}]}, "limits.rate[0] (r): per"),
        ({"concurrency": [{"name": "c", "per": "key", "max": 0}]}, "limits.concurrency[0] (c)"),
        ({"concurrency": [{"name": "c", "per": "key", "max": 1, "on_limit": "x"}]}, "on_limit"),
        ({"size": {"calls_per_batch": 0}}, "limits.size: calls_per_batch"),
        ({"speed": {}}, "unknown key(s) ['speed'] in limits"),
        ({"rate": {"name": "r"}}, "limits.rate must be a list"),
    ],
)
def test_a_bad_entry_is_an_error_at_startup_naming_its_file_and_itself(tmp_path, section, says):
    with pytest.raises(ConfigurationError) as caught:
        sources(tmp_path, {"limits": section})
    assert str(tmp_path / "org.json") in str(caught.value) and says in str(caught.value)


def test_two_entries_of_one_name_are_an_error(tmp_path):
    rate = {"name": "r", "per": "key", "limit": "1/second"}
    with pytest.raises(ConfigurationError, match=r"limits.rate\[1\] \(r\): another entry"):
        sources(tmp_path, {"limits": {"rate": [rate, rate]}})


def test_the_user_file_may_only_tighten(tmp_path):
    org = {"limits": {"size": {"calls_per_batch": 100}, "fair_share": {"in_flight_per_key": 4}}}
    user_rate = {"name": "mine", "per": "key", "limit": "1/second"}
    found = sources(
        tmp_path, org, {"limits": {"size": {"calls_per_batch": 500}, "rate": [user_rate]}}
    )
    assert found.limits.calls_per_batch == 100  # a larger size does not loosen
    snap = Limits.from_snapshot(found.policy_for(tmp_path).snapshot()["limits"])
    assert [r.name for r in snap.rates] == ["mine"] and snap.fair_share.in_flight_per_key == 4
    assert (
        sources(
            tmp_path, {"limits": {"size": {"calls_per_batch": 5000}}}, {}
        ).limits.calls_per_batch
        == 5000
    )  # a file without a size leaves it
    tighter = sources(tmp_path, org, {"limits": {"size": {"calls_per_batch": 10}}})
    assert tighter.limits.calls_per_batch == 10
    with pytest.raises(ConfigurationError, match="fair_share is the org policy's"):
        sources(tmp_path, {}, {"limits": {"fair_share": {"in_flight_per_key": 99}}})


def test_without_limits_the_size_is_the_default_and_nothing_travels(tmp_path):
    found = sources(tmp_path, {})
    assert found.limits.calls_per_batch == limits.CALLS_PER_BATCH == 1000
    assert "limits" not in found.policy_for(tmp_path).snapshot()


@pytest.mark.parametrize(
    ("arguments", "host"),
    [({"url": "https://A.example/x"}, "a.example"), ({"url": 3}, None), ("x", None), ({}, None)],
)
def test_the_host_of_a_call(arguments, host):
    assert limits.host_of(arguments) == host


def test_a_tool_with_a_host_of_its_own_counts_there_whatever_its_arguments(tmp_path):
    """An MCP server reached by URL: its tools' calls count under a per-host
    rate at the server's host (`CapabilitySpec.host`), not at a URL argument."""
    rate = {"name": "remote", "per": "host", "limit": "5/second"}
    found = sources(tmp_path, {"limits": {"rate": [rate]}})
    snap = Limits.from_snapshot(found.policy_for(tmp_path).counted_for("k").snapshot()["limits"])
    [(_, scope)] = snap.windows("search__find", {"url": "https://other.org/"}, "mcp.example.com")
    assert scope.endswith("remote:host:mcp.example.com")
    assert snap.windows("search__find", {}) == []  # no host at all: it does not count


def test_a_snapshot_s_limits_are_parsed_once_and_each_snapshot_keeps_its_own(tmp_path):
    """Every message of a batch, and each check of a call, carries the same
    snapshot: the sender, the worker and the finish share one parse."""
    found = sources(tmp_path, {"limits": {"fair_share": {"in_flight_per_key": 3}}})
    snapshot = found.policy_for(tmp_path).counted_for("key:a").snapshot()["limits"]
    first = Limits.from_snapshot(json.loads(json.dumps(snapshot)))
    assert Limits.from_snapshot(json.loads(json.dumps(snapshot))) is first
    other = Limits.from_snapshot({**snapshot, "principal": "key:b"})
    assert other is not first and other.sender == "key:b" and first.sender == "key:a"
    assert Limits.from_snapshot(None) is Limits.from_snapshot({}) is limits.NONE


@pytest.mark.parametrize(
    "spelling", ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "localhost", "[::ffff:7f00:1]"]
)
def test_a_per_host_rate_counts_the_address_not_its_spelling(spelling):
    """What the resolver reads as 127.0.0.1 counts under 127.0.0.1 (issue 40)."""
    rate = Rate(name="fetch", per="host", limit="3/minute", source="org")
    assert rate.scope("http_get", None, {"url": f"http://{spelling}:8000/x"}) == "127.0.0.1"
    assert rate.scope("http_get", None, {"url": "https://A.example/"}) == "a.example"
