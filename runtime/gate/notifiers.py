"""Who is told when a call starts to wait for approval: the org policy's
`notifications`, a list of webhooks (docs/architecture.md, "Approval
notifications"):

    {"notifications": [
        {"name": "ops-slack", "url": "https://hooks.slack.com/services/...",
         "format": "slack", "gateway_url": "https://toolrun.example.com"}]}

`format` is `json` (toolrun's own body, the default) or `slack` (`text` and
`blocks`, which Slack's incoming webhooks and their look-alikes accept);
`gateway_url`, if given, is where the message's answer links point. Only the org
file declares them: a webhook's URL is often a credential, and who is told of a
pending call is the organisation's decision, not a repository's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from runtime.errors import ConfigurationError

FORMATS = ("json", "slack")
FIELDS = {"name", "url", "format", "gateway_url"}


@dataclass(frozen=True)
class Notifier:
    name: str  # what the ledger records: never the URL, which may be a secret
    url: str
    format: Literal["json", "slack"] = "json"
    gateway_url: str | None = None


def read(data: dict[str, Any], source: str) -> tuple[Notifier, ...]:
    """A settings file's notifiers; a malformed one is a `ConfigurationError`
    that names the file and the entry."""
    entries = data.get("notifications", [])
    if not isinstance(entries, list):
        raise ConfigurationError(f"{source}: notifications must be a list of webhooks")
    found = []
    for index, entry in enumerate(entries):
        where = f"{source}: notifications[{index}]"
        if not isinstance(entry, dict):
            raise ConfigurationError(f"{where} must be an object with a url")
        unknown = sorted(set(entry) - FIELDS)
        if unknown:
            raise ConfigurationError(f"{where}: unknown key(s) {unknown}; known: {sorted(FIELDS)}")
        url = _http_url(entry.get("url"), f"{where}.url")
        form = entry.get("format", "json")
        if form not in FORMATS:
            raise ConfigurationError(f"{where}.format must be one of {list(FORMATS)}")
        gateway = entry.get("gateway_url")
        if gateway is not None:
            gateway = _http_url(gateway, f"{where}.gateway_url").rstrip("/")
        name = entry.get("name", urlsplit(url).hostname)
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"{where}.name must be a non-empty string")
        found.append(Notifier(name, url, form, gateway))
    names = [notifier.name for notifier in found]
    if len(names) != len(set(names)):
        raise ConfigurationError(f"{source}: two notifications share a name; name each one")
    return tuple(found)


def _http_url(value: Any, where: str) -> str:
    if not isinstance(value, str) or urlsplit(value).scheme not in ("http", "https"):
        raise ConfigurationError(f"{where} must be an http:// or https:// URL")
    if not urlsplit(value).hostname:
        raise ConfigurationError(f"{where} names no host")
    return value
