"""Values found by the names they are assigned to, in every format the issue
names; names matched by their parts; code left alone."""

from __future__ import annotations

import pytest

from runtime.redaction import redact_text
from runtime.redaction.secret_names import is_secret_name

VALUE = "Zq7pW2xK9mRt"


@pytest.mark.parametrize(
    "line",
    [
        "DB_PASSWORD={v}",  # .env
        "export GITLAB_TOKEN={v}",  # shell
        'export API_KEY="{v}"',
        "aws_secret_access_key = {v}",  # INI
        'client_secret = "{v}"',  # TOML
        "  password: {v}",  # YAML
        "  apiKey: '{v}'",
        '{{"githubToken": "{v}", "n": 1}}',  # JSON
        '{{\\"password\\": \\"{v}\\"}}',  # JSON inside a JSON string
        "Server=db;User ID=app;Password={v};Encrypt=True",  # connection strings
        "Endpoint=sb://bus/;SharedAccessKey={v};x=1",
        "AccountName=acct;AccountKey={v};EndpointSuffix=core.windows.net",
        "redis://default:{v}@cache:6379/0",  # URL userinfo
        "Authorization: Basic {v}",  # HTTP headers
        "X-Api-Key: {v}",
        "Cookie: session={v}; theme=dark",
        "mysql --password {v} db",  # command-line flags
        "release --token={v}",
        "git --db-pass {v}",
        "curl 'https://api.example/items?api_key={v}&page=2'",
        "settings = {{'client-secret': '{v}'}}",
        'password := "{v}"',  # Go
        "contraseña: {v}",  # a name and a text that are not ASCII
        "« redis://default:{v}ä@cache:6379/0 »",
    ],
)
def test_a_value_under_a_secret_name_is_redacted(line):
    text = line.format(v=VALUE)
    out = redact_text(text)
    assert VALUE not in out, out
    assert "[REDACTED:" in out


@pytest.mark.parametrize(
    "name",
    [
        "AWS_SECRET_ACCESS_KEY",
        "githubToken",
        "client-secret",
        "db_pass",
        "AccountKey",
        "X-Api-Key",
        "APIKey",
        "HF_TOKEN",
        "stripe.secret",
        "Authorization",
        "contraseña",
        "sessionKey",
        "SIGNING_SECRET",
        "keyPassphrase",
        # a strong noun anywhere, qualified rather than described (issue 40)
        "SECRET_KEY_BASE",
        "API_KEY_PROD",
        "JWT_SIGNING",
        "client-key-data",
    ],
)
def test_names_are_matched_by_their_parts(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "password_file",
        "max_tokens",
        "tokenizer",
        "bypass",
        "monkey",
        "key",
        "secret_name",
        "token_type",
        "keyboard",
        "passenger",
        "compass",
        "PASSWORD_MIN_LENGTH",
        "token_count",
        "secret_file_path",
        "SIGNING_ALGORITHM",
        "cookie_domain",
        "pass_through",
        "api_key_header",
    ],
)
def test_names_that_only_contain_a_noun_are_not_secret(name):
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    "text",
    [
        "password: str",
        "token: str | None = None",
        "password = settings.password",
        "api_key=api_key",
        "token = make_token(user)",
        "PASSWORD=$DB_PASSWORD",
        "url: redis://:${REDIS_PASSWORD:?set it in .env}@redis:6379/0",
        "password_file = /run/secrets/db",
        "max_tokens = 4096",
        "REDIS_PASSWORD=change-me-redis",
        '"Authorization": "Bearer ..."',
        '"cookie": "^0.7.1"',
        "if password == other:",
        '"Basic Auth Credentials": "url_password",',
        "instead of failing every pass: the throttle tests' parcels stopped the sweep",
        "the last token: this one, then the next",
    ],
)
def test_code_references_placeholders_and_versions_are_left_alone(text):
    assert redact_text(text) == text


def test_the_marker_names_the_kind_after_the_name():
    out = redact_text(f"AWS_SECRET_ACCESS_KEY={VALUE}\nclientSecret: {VALUE}")
    assert (
        out == "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_access_key]\n"
        "clientSecret: [REDACTED:client_secret]"
    )


def test_a_mapping_value_under_a_secret_key_is_replaced_whole():
    from runtime.redaction import redact

    out = redact({"headers": {"X-Api-Key": "short", "Accept": "json"}, "db_pass": "pw"})
    assert out == {
        "headers": {"X-Api-Key": "[REDACTED:x_api_key]", "Accept": "json"},
        "db_pass": "[REDACTED:db_pass]",
    }


@pytest.mark.parametrize(
    "line",
    [  # what detect-secrets' assignment-shaped plugins (left out of detectors.py) look for
        'cloudant_password = "{hex64}"',
        "cl_pw: {hex64}",
        'ibm_cloud_iam_key = "{b44}"',
        "iam-api-key: {b44}",
        "ibm_cos_hmac_secret_access_key={hex48}",
        'softlayer_api_key = "{hex64}"',
    ],
)
def test_the_plugins_assignment_shapes_are_names_this_rule_covers(line):
    values = {"hex64": "0a1b2c3d" * 8, "b44": "Zq7pW2xK9mRt_" * 3 + "abcde", "hex48": "9f8e" * 12}
    text = line.format(**values)
    out = redact_text(text)
    assert not any(value in out for value in values.values()), out


# --- XML elements and PHP constants (issue 40: settings.xml, wp-config.php) ---

DECLARED = "Tn5vX8qLm2Zr"


@pytest.mark.parametrize(
    "text",
    [
        "<server><id>r</id><password>{v}</password></server>",
        "<privateKey>{v}</privateKey>",
        "define( 'DB_PASSWORD', '{v}' );",
        'define("AUTH_KEY", "{v}");',
        "define('SECURE_AUTH_KEY', '{v}');",
    ],
)
def test_a_value_a_secret_name_declares_is_redacted(text):
    out = redact_text(text.format(v=DECLARED))
    assert DECLARED not in out and "[REDACTED:" in out, out


@pytest.mark.parametrize(
    "text",
    [
        "<server><id>releases</id><username>deploy</username></server>",
        "<p>Reset your password</p><password></password>",
        "define( 'DB_NAME', 'wordpress' );",
        "define('NONCE_SALT', 'abcdefghij');",  # a salt needs wp-config.php (file_kinds)
    ],
)
def test_other_elements_and_constants_are_kept(text):
    assert redact_text(text) == text


def test_wordpress_salts_are_redacted_in_its_configuration():
    text = "define('NONCE_SALT', 'k#2P!x9@Lm$7qZ&w');\ndefine('WP_DEBUG', false);\n"
    out = redact_text(text, "site/wp-config.php")
    assert out == "define('NONCE_SALT', '[REDACTED:wordpress_key]');\ndefine('WP_DEBUG', false);\n"
