import pytest

from runtime.results.redaction import redact, redact_text

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
