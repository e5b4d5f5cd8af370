"""The detectors that find secrets by their shape: detect-secrets' regex plugins
(Yelp's maintained set), toolrun's own where that set lacks a kind, and a
deployment's patterns (`TOOLRUN_REDACTION_PATTERNS`).

Each detector is a kind (the name its marker shows), compiled patterns and their
anchors (`runtime/redaction/anchors.py`). `find` returns the spans to redact; values found
by the names they are assigned to are `runtime/redaction/secret_names.py`'s part.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector

from runtime.redaction.anchors import Anchor, anchors, lines_with, prefix
from runtime.settings import check_pattern

# Plugins whose patterns do not look for a secret by its shape: an IP address is
# not a secret, private keys are taken as whole blocks below, and the keyword and
# high-entropy plugins are not regex plugins (names are secret_names.py's part).
LEFT_OUT = {"Public IP (ipv4)", PrivateKeyDetector.secret_type}

# The patterns detect-secrets builds with `build_assignment_regex` (Cloudant, IBM,
# SoftLayer: `<prefix>_?(key|pwd|password|pass|token) = <value>`) are names the
# names rule covers whole, and each would cost as much as all the others together.
ASSIGNMENT_SHAPED = r"(?:(?<=\W)|(?<=^))"

# Plugins whose patterns capture the secret in their first group (an assignment,
# or a URL's password); the others' whole match is the secret.
CAPTURING = {
    "AWS Access Key",
    "Basic Auth Credentials",
    "Cloudant Credentials",
    "IBM COS HMAC Credentials",
    "IBM Cloud IAM Key",
    "NPM tokens",
    "SoftLayer Credentials",
}

# Markers name kinds briefly; the rest are the plugin's secret_type in snake case.
KINDS = {
    "Azure Storage Account access key": "azure_storage_key",
    "Basic Auth Credentials": "url_password",
    "JSON Web Token": "jwt",
    "NPM tokens": "npm_token",
    "OpenAI Token": "openai_key",
    "Stripe Access Key": "stripe_key",
}

_PRIVATE_KEY_HEADERS = "|".join(
    re.escape(header.pattern.removeprefix("BEGIN ")) for header in PrivateKeyDetector.denylist
)

# Kinds the plugin set lacks or has only older shapes of (OpenAI project keys,
# GitHub fine-grained tokens, Stripe test keys, npm tokens outside .npmrc).
OWN: dict[str, list[str]] = {
    "private_key": [
        # the whole block, not only the header line the plugin looks for
        rf"(?s)-----BEGIN (?:{_PRIVATE_KEY_HEADERS})-----.*?(?:-----END [A-Z0-9 ]+-----|\Z)",
        r"(?s)PuTTY-User-Key-File-\d+:.*?Private-MAC: *[0-9a-f]+",
        # in base64 (kubeconfig's `client-key-data`), told from a certificate by
        # what it decodes to (`_private_key`)
        r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{16,}={0,2}",
    ],
    "anthropic_key": [r"sk-ant-[A-Za-z0-9_\-]{16,}"],
    "openai_key": [r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}"],
    "huggingface_token": [r"\bhf_[A-Za-z0-9]{30,}"],
    "google_api_key": [r"\bAIza[0-9A-Za-z_\-]{35}"],
    "github_token": [r"\bgithub_pat_[A-Za-z0-9_]{22,}"],
    "npm_token": [r"\bnpm_[A-Za-z0-9]{36}"],
    "stripe_key": [r"\b(?:sk|rk)_test_[0-9a-zA-Z]{16,}"],
    # the plugin's URL shape wants a user name; `redis://:pw@host` has none
    "url_password": [r"://:([^{}\s@/]+)@"],
    "bearer_token": [r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/\-]{8,}=*)"],
    # a registry login in `.docker/config.json`: base64 of `user:password`
    "docker_auth": [r'"auth"[ \t]*:[ \t]*"([A-Za-z0-9+/]{8,}={0,2})"'],
    # `.npmrc`'s `_auth` (base64 of `user:password`, `_login`), bare or scoped to a
    # registry; each starts with a literal, which the engine finds as fast as `find`
    "npm_auth": [r"_auth[ \t]*=[ \t]*([A-Za-z0-9+/]{8,}={0,2})"],
    # a `.netrc` entry on one line, wherever it is shown (by name of file: file_kinds.py)
    "netrc_password": [r"machine[ \t]+\S+[ \t]+(?:login[ \t]+\S+[ \t]+)?password[ \t]+(\S+)"],
    # toolrun's own gateway keys (runtime/gateway/keys.py), should one reach a log or a result
    "toolrun_api_key": [r"\btrk_[0-9a-f]{12}_[A-Za-z0-9_\-]{32,}"],
}


def _decoded(text: str) -> bytes:
    try:
        return base64.b64decode(text[: len(text) // 4 * 4], validate=True)
    except ValueError:
        return b""


def _login(text: str) -> bool:
    """base64 of `user:password`, as docker's `auth` holds."""
    return b":" in _decoded(text)


def _private_key(text: str) -> bool:
    return not text.startswith("LS0t") or b"PRIVATE KEY" in _decoded(text[:64])


# The own detectors' checks of a match (the plugins bring their own).
OWN_VALID = {"docker_auth": _login, "npm_auth": _login, "private_key": _private_key}

# A match ends where its token does: a key longer than the plugin's fixed length
# must not leave a readable tail.
_TAIL = re.compile(r"[A-Za-z0-9_\-+/=]*")
_JWT_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")
_TRIM = " \t\r\n=:\"'"


@dataclass(frozen=True, eq=False)
class Detector:
    kind: str
    patterns: tuple[re.Pattern[str], ...]
    anchors: tuple[Anchor | None, ...]
    captures: bool = False
    valid: object = None  # the plugin's own check of a match, e.g. a JWT's JSON parts

    def spans(self, text: str, lowered: str | None) -> Iterable[tuple[int, int]]:
        lines: dict[Anchor, list[tuple[int, int]]] = {}
        for pattern, found in zip(self.patterns, self.anchors, strict=True):
            if found is None or lowered is None:
                windows = [(0, len(text))]
            else:
                if found not in lines:
                    lines[found] = lines_with(lowered if found.folded else text, found.strings)
                windows = lines[found]
                if pattern.flags & re.S:  # a block (a private key) runs on past its first line
                    windows = [(start, len(text)) for start, _ in windows[:1]]
            for start, end in windows:
                for match in pattern.finditer(text, start, end):
                    yield from self._span(text, match)

    def _span(self, text: str, match: re.Match[str]) -> Iterable[tuple[int, int]]:
        group = 1 if self.captures and match.lastindex and match.group(1) else 0
        start, end = match.span(group)
        while start < end and text[start] in _TRIM:
            start += 1
        while end > start and text[end - 1] in _TRIM:
            end -= 1
        if self.valid is not None and not self.valid(text[start:end]):
            return
        end = (_JWT_TAIL if self.kind == "jwt" else _TAIL).match(text, end).end()
        if end - start >= 4:
            yield start, end


SHORT = 2048  # below this many characters, one look for each trigger beats line windows

Span = tuple[int, int, int, str]  # start, end, the detector's rank, its kind


@dataclass(frozen=True, eq=False)
class DetectorSet:
    """The detectors in force, first rank first, with their trigger index; keyed
    on by identity in caches (hashing forty patterns on every call costs more
    than redacting a short text)."""

    items: tuple[Detector, ...]
    triggers: tuple = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "triggers", _triggers(self.items))


def find(found: DetectorSet, text: str, lowered: str) -> list[Span]:
    """Every span `found` detects in `text` (`lowered` is it in lower case).

    A short text (a log line, a field of a result) is most of what a call
    redacts: there the cost is each detector's overhead, not its scan, so each
    trigger string of the whole set (its anchors, or its literal prefix) is
    looked for once, and only the patterns whose trigger occurs run."""
    items = found.items
    if len(text) > SHORT:
        return [
            (s, e, rank, d.kind) for rank, d in enumerate(items) for s, e in d.spans(text, lowered)
        ]
    cased, folded, always = found.triggers
    chosen = dict.fromkeys(always)
    for string, entries in cased.items():
        if string in text:
            chosen.update(dict.fromkeys(entries))
    for string, entries in folded.items():
        if string in lowered:
            chosen.update(dict.fromkeys(entries))
    return [
        (s, e, rank, items[rank].kind)
        for rank, pattern in chosen
        for match in pattern.finditer(text)
        for s, e in items[rank]._span(text, match)
    ]


Entry = tuple[int, re.Pattern[str]]  # a detector's rank, one of its patterns


def _triggers(
    found: tuple[Detector, ...],
) -> tuple[dict[str, list[Entry]], dict[str, list[Entry]], list[Entry]]:
    """The patterns of `found` by the strings that trigger them: case-sensitive
    ones, lowercase ones (in the lowered text), and those that always run."""
    cased: dict[str, list[Entry]] = {}
    folded: dict[str, list[Entry]] = {}
    always: list[Entry] = []
    for rank, detector in enumerate(found):
        for pattern, anchor in zip(detector.patterns, detector.anchors, strict=True):
            start = prefix(pattern)
            if anchor is not None:
                strings, into = anchor.strings, folded if anchor.folded else cased
            elif start:
                strings, into = {start}, cased
            else:
                always.append((rank, pattern))
                continue
            for string in strings:
                into.setdefault(string, []).append((rank, pattern))
    return cased, folded, always


def _detector(kind: str, patterns: Iterable[re.Pattern[str]], **extra) -> Detector:
    """Patterns that start with a literal run on the whole text (the engine finds
    the literal itself), unless several share its first two characters (GitLab's
    `glpat-`, `glcbt-`...): then one look for those serves them all."""
    patterns = tuple(patterns)
    starts = [prefix(p)[:2] for p in patterns]
    shared = {start for start in starts if len(start) == 2 and starts.count(start) > 1}
    found = tuple(
        Anchor(frozenset({start}), folded=False) if start in shared else anchors(p)
        for p, start in zip(patterns, starts, strict=True)
    )
    return Detector(kind, patterns, found, **extra)


@lru_cache(maxsize=4096)
def snake(name: str) -> str:
    """`AWS Access Key` -> `aws_access_key`, `githubToken` -> `github_token`."""
    name = _CAMEL.sub("_", name.strip())
    return _NOT_WORD.sub("_", name.lower()).strip("_")[:48] or "secret"


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[^a-z0-9]+")


def _slug(secret_type: str) -> str:
    """`GitLab Token` -> `gitlab_token`: the plugin's words, not its camel case."""
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


@lru_cache(maxsize=1)
def library() -> tuple[Detector, ...]:
    """detect-secrets' regex plugins, in a stable order, then toolrun's own."""
    found = []
    for secret_type, plugin in sorted(get_mapping_from_secret_type_to_class().items()):
        if secret_type in LEFT_OUT or not issubclass(plugin, RegexBasedDetector):
            continue
        found.append(
            _detector(
                KINDS.get(secret_type, _slug(secret_type)),
                [p for p in plugin.denylist if not p.pattern.startswith(ASSIGNMENT_SHAPED)],
                captures=secret_type in CAPTURING,
                valid=getattr(plugin, "is_formally_valid", None),
            )
        )
    own = [
        _detector(
            kind, compiled, captures=any(p.groups for p in compiled), valid=OWN_VALID.get(kind)
        )
        for kind, pats in OWN.items()
        for compiled in [[re.compile(p) for p in pats]]
    ]
    # Own detectors first: where spans overlap the first detector's kind is kept,
    # and a private key block or an `sk-ant-` key is more precise than a fragment.
    return (*own, *found)


@lru_cache(maxsize=8)
def detectors(extra: tuple[tuple[str, str], ...] = ()) -> DetectorSet:
    """The library's detectors, and a deployment's `(kind, regex)` pairs first."""
    deployment = [_detector(snake(kind), [re.compile(regex)]) for kind, regex in extra]
    return DetectorSet((*deployment, *library()))


def compile_patterns(patterns: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """A deployment's patterns, checked (`runtime.settings.check_pattern`): an
    invalid one is a ValueError naming it."""
    for kind, regex in patterns.items():
        check_pattern(kind, regex)
    return tuple(sorted(patterns.items()))
