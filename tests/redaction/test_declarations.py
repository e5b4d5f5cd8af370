"""Secret names in XML elements and PHP constants (issue 40: Maven's
settings.xml, WordPress's wp-config.php); other elements and constants kept."""

from __future__ import annotations

import pytest

from runtime.redaction import redact_text

VALUE = "Tn5vX8qLm2Zr"


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
    out = redact_text(text.format(v=VALUE))
    assert VALUE not in out and "[REDACTED:" in out, out


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
    assert out == "define('NONCE_SALT', '[REDACTED:nonce_salt]');\ndefine('WP_DEBUG', false);\n"
