"""The redactor against two corpora: made-up credentials in the files they live
in (tests/data/secrets, every one must go, each marker naming its kind), and
ordinary text that must come back untouched (0 redactions)."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from runtime.redaction import redact_text

ROOT = Path(__file__).resolve().parents[2]
SECRETS = ROOT / "tests" / "data" / "secrets"
MANIFEST: dict[str, list[list[str]]] = json.loads((SECRETS / "manifest.json").read_text())
MARKER = re.compile(r"\[REDACTED:([a-z0-9_]+)\]")


def test_the_corpus_is_as_large_as_promised():
    secrets = [value for found in MANIFEST.values() for _, value in found]
    kinds = {kind for found in MANIFEST.values() for kind, _ in found}
    formats = {Path(name).suffix or Path(name).name for name in MANIFEST}
    assert len(secrets) >= 60 and len(set(secrets)) == len(secrets)
    assert len(kinds) >= 20
    assert len(formats) >= 8, formats


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_secret_in_a_corpus_file_is_redacted_and_named(name):
    text = (SECRETS / name).read_text()
    out = redact_text(text, name)  # as read_file shows it (some kinds need the file's name)
    kinds = set(MARKER.findall(out))
    for kind, value in MANIFEST[name]:
        assert value not in out, (kind, value)
        # no long piece of it either (a key cut short leaves its tail readable)
        assert not any(value[i : i + 12] in out for i in range(0, max(1, len(value) - 12), 4))
        assert kind in kinds, (kind, sorted(kinds))


def test_ordinary_lines_around_the_secrets_are_kept():
    out = redact_text((SECRETS / "production.env").read_text())
    for line in ("APP_PORT=8080", "AWS_REGION=eu-west-1", "FEATURE_FLAGS=search,export"):
        assert line in out
    assert "postgres://app_user:[REDACTED:url_password]@db.internal.example:5432/app" in out


def test_a_kubeconfig_keeps_its_certificates_and_a_rails_env_its_settings():
    certificate = base64.b64encode(
        b"-----BEGIN CERTIFICATE-----\n" + base64.b64encode(bytes(range(200))) + b"\n"
    ).decode()
    kube = (SECRETS / "kubeconfig.yaml").read_text()
    kube = kube.replace("    client-key-data:", f"    client-certificate-data: {certificate}\n&")
    kube = kube.replace("&", "    client-key-data:")
    out = redact_text(kube, "kubeconfig.yaml")
    assert certificate in out  # base64 of a certificate is no private key
    assert "[REDACTED:private_key]" in out
    out = redact_text((SECRETS / "rails.env").read_text())
    for line in ("RAILS_ENV=production", "PASSWORD_MIN_LENGTH=12", "TOKEN_TTL_SECONDS=3600"):
        assert line + "\n" in out


def test_a_yaml_value_below_its_name_is_redacted_and_its_neighbours_kept():
    out = redact_text((SECRETS / "broker.yaml").read_text())
    for line in ("  concurrency: 4", "  user: app", "  pool: 10", "  verify: true"):
        assert line + "\n" in out
    assert "  issuer: https://login.example.com\n" in out
    assert "redis://:[REDACTED:url_password]@cache.internal:6379/0" in out
    # one marker per line of a value: the file keeps its line numbers
    assert out.count("\n") == (SECRETS / "broker.yaml").read_text().count("\n")


ORDINARY_BELOW_A_NAME = [
    "password:\n  min_length: 12\n  require_digit: true\n",
    "token:\n  - scope: read\n",
    "password:\n\nother: value\n",
    "def check(user):\n    if not password:\n        raise ValueError('no password')\n",
    "class Login:\n    password: str\n    token: SecretStr\n",
    "secret: |\n",
    "{% if password %}\n  {{ password }}\n{% endif %}\n",
]


@pytest.mark.parametrize("text", ORDINARY_BELOW_A_NAME)
def test_what_follows_a_secret_name_is_kept_when_it_is_not_a_value(text):
    assert redact_text(text) == text


# Ordinary text: nothing in it is a secret, so nothing may be redacted.


def _own_source() -> dict[str, str]:
    """The repository's code, docs and deployment files; not tests (they hold
    made-up secrets on purpose) nor the demo's (it shows one being redacted)."""
    paths = [*ROOT.glob("runtime/**/*.py"), *ROOT.glob("workers/**/*.py"), ROOT / "README.md"]
    paths += [*ROOT.glob("docs/**/*.md"), *ROOT.glob("docsgen/*.py"), ROOT / "mkdocs.yml"]
    paths += [*ROOT.glob("compose/*"), ROOT / "pyproject.toml", ROOT / "Makefile"]
    return {
        str(p.relative_to(ROOT)): p.read_text()
        for p in paths
        if p.is_file() and p.name != "demo.py"
    }


def _lockfile(rng: random.Random) -> str:
    packages = {
        f"node_modules/pkg-{i}": {
            "version": f"1.{i}.0",
            "resolved": f"https://registry.npmjs.org/pkg-{i}/-/pkg-{i}-1.{i}.0.tgz",
            "integrity": "sha512-"
            + base64.b64encode(hashlib.sha512(rng.randbytes(32)).digest()).decode(),
            "dependencies": {"cookie": "^0.7.1", "token-stream": "~1.2.0"},
        }
        for i in range(300)
    }
    return json.dumps({"name": "app", "lockfileVersion": 3, "packages": packages}, indent=2)


def _git_log(rng: random.Random) -> str:
    entries = []
    for i in range(200):
        sha = rng.randbytes(20).hex()
        entries.append(
            f"commit {sha}\nMerge: {sha[:7]} {rng.randbytes(4).hex()[:7]}\n"
            f"Author: Dev {i} <dev{i}@example.com>\nDate:   Mon Nov {1 + i % 28} 10:00:00 2026\n\n"
            f"    Rotate the signing key reader; token counts in {sha[:12]}\n\n"
            f" runtime/ledger/store.py | {i} ++--\n"
        )
    done = subprocess.run(  # the repository's own history, when this is a checkout
        ["git", "log", "--stat", "-n", "200"], cwd=ROOT, capture_output=True, text=True
    )
    return "".join(entries) + (done.stdout if done.returncode == 0 else "")


def _image_json(rng: random.Random) -> str:
    images = [base64.b64encode(rng.randbytes(6000)).decode() for _ in range(20)]
    return json.dumps(
        [
            {"name": f"chart-{i}.png", "data": f"data:image/png;base64,{data}"}
            for i, data in enumerate(images)
        ]
    )


def _ordinary() -> dict[str, str]:
    rng = random.Random(20261130)
    return {
        **_own_source(),
        "package-lock.json": _lockfile(rng),
        "git log": _git_log(rng),
        "uuids": "\n".join(
            str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(3000)
        ),
        "images.json": _image_json(rng),
        "clipboard.min.js": (ROOT / "tests" / "data" / "ordinary" / "clipboard.min.js").read_text(),
    }


def test_ordinary_text_gets_no_redaction():
    texts = _ordinary()
    assert len(texts) > 60
    redacted = {}
    for name, text in texts.items():
        out = redact_text(text)
        if out.count("[REDACTED:") != text.count("[REDACTED:"):
            redacted[name] = [line for line in out.splitlines() if "[REDACTED:" in line][:3]
    assert redacted == {}
