"""The org policy's approval notifiers (runtime/gate/notifiers.py): read once
with the org file, and a malformed one is an error that names the file."""

from __future__ import annotations

import re

import pytest

from runtime.errors import ConfigurationError
from runtime.gate.notifiers import Notifier
from runtime.gate.policy import org_notifiers
from runtime.settings import Settings
from tests.gate.test_policy import sources, write


def test_the_org_file_declares_notifiers_that_every_process_reads_alike(tmp_path):
    hooks = [
        {"url": "https://hooks.example.com/a"},
        {
            "name": "chat",
            "url": "http://127.0.0.1:9/x",
            "format": "slack",
            "gateway_url": "https://gw/",
        },
    ]
    found = sources(tmp_path, org={"notifications": hooks}).notifiers
    assert found == (
        Notifier("hooks.example.com", "https://hooks.example.com/a"),
        Notifier("chat", "http://127.0.0.1:9/x", "slack", "https://gw"),
    )
    settings = Settings(home=tmp_path, policy_file=tmp_path / "org.json")
    assert org_notifiers(settings) == found  # what a worker reads
    assert org_notifiers(Settings(home=tmp_path)) == ()
    assert sources(tmp_path).notifiers == ()


@pytest.mark.parametrize(
    ("hooks", "says"),
    [
        ({"url": "https://x"}, "notifications must be a list"),
        (["https://x"], "notifications[0] must be an object"),
        ([{"url": "ftp://x/"}], "notifications[0].url must be an http:// or https:// URL"),
        ([{"url": "https://x", "secret": "s"}], "unknown key(s) ['secret']"),
        ([{"url": "https://x", "format": "teams"}], "notifications[0].format must be one of"),
        ([{"url": "https://x"}, {"url": "https://x/2"}], "two notifications share a name"),
    ],
)
def test_a_bad_notifier_is_an_error_naming_the_file(tmp_path, hooks, says):
    with pytest.raises(ConfigurationError, match=r"org\.json.*" + re.escape(says)):
        sources(tmp_path, org={"notifications": hooks})


def test_only_the_org_file_declares_notifiers(tmp_path):
    write(tmp_path / "user.json", {})
    with pytest.raises(ConfigurationError, match=re.escape("unknown key(s) ['notifications']")):
        sources(tmp_path, user={"notifications": [{"url": "https://x"}]})
