import json

import pytest

from runtime.redaction import redact, redact_text

SECRETS = [
    "sk-ant-api03-" + "a1B2" * 10,
    "sk-proj-" + "Z9y8" * 8,
    "AKIAABCDEFGHIJKLMNOP",
    "ghp_" + "x" * 36,
    "xoxb-1234567890-abcdef",
    "AIza" + "b" * 35,
    "sk_live_" + "c" * 24,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_provider_keys_are_removed(secret):
    assert secret not in redact_text(f"key: {secret} end")


def test_bearer_tokens_private_keys_and_url_passwords():
    text = (
        "Authorization: Bearer abc.def-ghi_jkl\n"
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\n"
        "db=postgres://app:hunter22@db.internal:5432/x password=swordfish"
    )
    out = redact_text(text)
    for secret in ("abc.def-ghi_jkl", "b3BlbnNzaC1rZXk", "hunter22", "swordfish"):
        assert secret not in out
    assert "postgres://app:[REDACTED:url_password]@db.internal" in out


def test_structures_are_walked_and_secret_keys_blanked():
    data = {"headers": {"Authorization": "token-x"}, "list": ["sk-ant-api03-" + "q" * 30], "n": 3}
    out = redact(data)
    assert out["headers"]["Authorization"].startswith("[REDACTED")
    assert out["list"][0].startswith("[REDACTED")
    assert out["n"] == 3


def test_ordinary_text_is_left_alone():
    text = "def read_file(path): return open(path).read()  # tokens are counted"
    assert redact_text(text) == text


def test_each_runtime_redacts_by_the_settings_it_was_given(tmp_path):
    """Two runtimes in one process, each given its own patterns: each redacts
    its results and its ledger rows by its own, and neither by the other's
    (docs/architecture.md, "Secrets")."""
    from runtime import Settings, memory_runtime
    from runtime.tools.loading import load_tools

    tools = load_tools(["tests.support.tools"])
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"trusted_workspaces": [str(tmp_path)]}))
    said = "ACME-12345678 and BETA-87654321"
    calls = [
        {"id": "echo", "name": "echo", "arguments": {"text": said}},
        {"id": "fail", "name": "explode", "arguments": {"message": said}},
    ]
    shown = {}
    for name, pattern in (("acme", r"ACME-\d{8}"), ("beta", r"BETA-\d{8}")):
        settings = Settings(
            home=tmp_path / name, user_settings_file=user, redaction_patterns={name: pattern}
        )
        with memory_runtime(tools, settings=settings) as rt:
            handle = rt.submit(calls, mode="bypass", workspace=tmp_path)
            echoed, failed = handle.results(timeout=30)
            rows = {row.call_id: row for row in rt.ledger.calls(handle.batch_id)}
        shown[name] = (
            echoed.model_message,
            echoed.content["text"],
            failed.model_message,
            rows["echo"].arguments["text"],
            rows["fail"].error_message,
        )
    assert shown["acme"] == ("[REDACTED:acme] and BETA-87654321",) * 2 + (
        "explode: ValueError: [REDACTED:acme] and BETA-87654321",
        "[REDACTED:acme] and BETA-87654321",
        "ValueError: [REDACTED:acme] and BETA-87654321",
    )
    assert shown["beta"] == ("ACME-12345678 and [REDACTED:beta]",) * 2 + (
        "explode: ValueError: ACME-12345678 and [REDACTED:beta]",
        "ACME-12345678 and [REDACTED:beta]",
        "ValueError: ACME-12345678 and [REDACTED:beta]",
    )
