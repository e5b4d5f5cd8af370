"""How long ended batches stay in the ledger, as the organisation decides it:
the org policy file's `retention` (docs/architecture.md, "Retention"):

    {"retention": {"days": 90, "export": "/var/lib/toolrun/archive"}}

`days` is the period, a positive number; `export`, optional, an absolute
directory where each batch's sealed transcript is written before it goes.
Keeping records at least so long (compliance) or no longer (privacy) is the
organisation's decision, so only the org file names it: a user or project
file with `retention` is refused like every other org-only key.

When the org file sets it, it wins whole over the deployment's default,
`TOOLRUN_RETENTION_DAYS` and `TOOLRUN_RETENTION_EXPORT`: an org `retention`
without `export` exports nothing, since an archive kept outside the ledger
would outlive the period the org chose. Without it, those settings decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.errors import ConfigurationError
from runtime.settings import Settings

FIELDS = {"days", "export"}
DEPLOYMENT = "TOOLRUN_RETENTION_DAYS"  # where the period comes from without the org's


@dataclass(frozen=True)
class Retention:
    days: float | None = None  # None: ended batches are kept for ever
    export: Path | None = None  # None: removed without a transcript
    source: str = DEPLOYMENT  # the org file's path, or the deployment's settings

    def overrides(self, settings: Settings) -> bool:
        """Whether this is the org file's and the deployment's settings say
        otherwise (the worker then says once which it uses)."""
        if self.source == DEPLOYMENT:
            return False
        deployment = (settings.retention_days, settings.retention_export)
        return deployment != (None, None) and deployment != (self.days, self.export)


def read(data: dict[str, Any], source: str) -> Retention | None:
    """A settings file's `retention`, or None when it names none; a malformed
    one is a `ConfigurationError` that names the file and the key."""
    if "retention" not in data:
        return None
    entry = data["retention"]
    if not isinstance(entry, dict):
        raise ConfigurationError(
            f'{source}: retention must be {{"days": N, "export": "/directory"}}'
        )
    unknown = sorted(set(entry) - FIELDS)
    if unknown:
        raise ConfigurationError(
            f"{source}: retention: unknown key(s) {unknown}; known: {sorted(FIELDS)}"
        )
    days = entry.get("days")
    if (
        isinstance(days, bool)
        or not isinstance(days, int | float)
        or not math.isfinite(days)
        or days <= 0
    ):
        raise ConfigurationError(f"{source}: retention.days must be a positive number of days")
    export = entry.get("export")
    if export is not None:
        if not isinstance(export, str) or not export.strip():
            raise ConfigurationError(f"{source}: retention.export must be a directory path")
        export = Path(export).expanduser()
        if not export.is_absolute():  # workers start in directories of their own
            raise ConfigurationError(f"{source}: retention.export must be an absolute path")
    return Retention(float(days), export, source)


def resolve(org: dict[str, Any], settings: Settings) -> Retention:
    """The org file's retention when it sets one, else the deployment's."""
    chosen = read(org, org.get("_source", "org policy file"))
    if chosen is not None:
        return chosen
    return Retention(settings.retention_days, settings.retention_export)
