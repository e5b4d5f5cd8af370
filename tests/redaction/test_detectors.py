"""The detector set: detect-secrets' plugins and toolrun's own, each kind named;
anchors that only save work; a deployment's patterns, checked at startup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.errors import ConfigurationError
from runtime.redaction import detectors, redact_text, redactor_for
from runtime.settings import Settings, get_settings

CORPUS = Path(__file__).resolve().parents[1] / "data" / "secrets"


def test_the_set_is_the_librarys_plugins_and_our_own_kinds():
    kinds = {d.kind for d in detectors.library()}
    plugin_kinds = [
        "aws_access_key",
        "azure_storage_key",
        "github_token",
        "gitlab_token",
        "npm_token",
        "pypi_token",
        "slack_token",
        "stripe_key",
        "sendgrid_api_key",
        "twilio_api_key",
        "jwt",
        "url_password",
        "discord_bot_token",
        "telegram_bot_token",
        "mailchimp_access_key",
    ]
    for plugin_kind in plugin_kinds:
        assert plugin_kind in kinds
    for own in ("private_key", "anthropic_key", "openai_key", "huggingface_token"):
        assert own in kinds
    assert "public_ip_ipv4" not in kinds  # an address is not a secret


def test_anchors_never_lose_a_match():
    """Every detector finds the same spans on its anchored lines as on the whole text."""
    texts = [p.read_text() for p in CORPUS.iterdir() if p.name != "manifest.json"]
    texts.append(Path(detectors.__file__).read_text())
    for text in texts:
        for detector in detectors.library():
            anchored = sorted(detector.spans(text, text.lower()))
            assert anchored == sorted(detector.spans(text, None)), detector.kind


def test_a_deployments_pattern_is_redacted_under_its_kind():
    acme = redactor_for({"acme token": r"acme_[a-z0-9]{16}"})
    assert acme.redact_text("use acme_0123456789abcdef now") == "use [REDACTED:acme_token] now"
    assert redact_text("use acme_0123456789abcdef now") == "use acme_0123456789abcdef now"
    assert redactor_for({"acme token": r"acme_[a-z0-9]{16}"}) is acme  # built once


def test_the_environments_patterns_are_not_read_behind_a_callers_back(monkeypatch):
    """Settings are given (docs/architecture.md, "Secrets"): the process's
    environment changes nothing for a caller that did not build a redactor from it."""
    monkeypatch.setenv("TOOLRUN_REDACTION_PATTERNS", json.dumps({"acme": r"acme_[0-9]{4}"}))
    get_settings.cache_clear()
    try:
        assert redact_text("acme_1234") == "acme_1234"
        assert redactor_for(get_settings().redaction_patterns).redact_text("acme_1234") == (
            "[REDACTED:acme]"
        )
    finally:
        monkeypatch.delenv("TOOLRUN_REDACTION_PATTERNS")
        get_settings.cache_clear()


@pytest.mark.parametrize(
    ("patterns", "said"),
    [
        ({"acme": "acme_[a-z"}, "'acme'"),
        ({"blank": "x*"}, "empty string"),
        ({"": "x+"}, "kind"),
        ("{acme: 1}", "not a JSON object"),
    ],
)
def test_an_invalid_pattern_is_a_startup_error_that_names_it(monkeypatch, patterns, said):
    raw = patterns if isinstance(patterns, str) else json.dumps(patterns)
    monkeypatch.setenv("TOOLRUN_REDACTION_PATTERNS", raw)
    get_settings.cache_clear()
    try:
        with pytest.raises(
            ConfigurationError, match="REDACTION_PATTERNS|redaction pattern"
        ) as raised:
            get_settings()
        assert said in str(raised.value)
    finally:
        monkeypatch.delenv("TOOLRUN_REDACTION_PATTERNS")
        get_settings.cache_clear()


def test_settings_take_patterns_as_a_mapping():
    assert Settings(redaction_patterns={"acme": "acme_[0-9]+"}).redaction_patterns == {
        "acme": "acme_[0-9]+"
    }


def test_a_deployments_patterns_reach_the_workers_it_starts(monkeypatch):
    from runtime.stack.environment import child_env

    patterns = {"acme": r"acme_[a-z0-9]{16}", "quote": "it's \\d+"}
    env = child_env(Settings(redaction_patterns=patterns), "redis://127.0.0.1:1/0", None)
    monkeypatch.setattr("os.environ", env)
    assert Settings().redaction_patterns == patterns


def test_an_empty_setting_is_no_patterns(monkeypatch):
    monkeypatch.setenv(
        "TOOLRUN_REDACTION_PATTERNS", ""
    )  # compose's ${TOOLRUN_REDACTION_PATTERNS:-}
    assert Settings().redaction_patterns == {}
