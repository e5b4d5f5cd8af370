"""Gateway keys: minting a token, and finding the key a bearer token stands for
(docs/architecture.md, "The HTTP gateway").

A token is `trk_<id>_<secret>`: the id finds the row, and only a SHA-256 of the
whole token is stored. The secret is 256 random bits, so a fast hash is enough
(a slow one protects guessable passwords, which these are not), and the check
compares digests in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from runtime.errors import ConfigurationError
from runtime.ledger.keys import Keys
from runtime.ledger.tables import ApiKeyRow
from runtime.types import Mode

PREFIX = "trk_"


class Role(StrEnum):
    submitter = "submitter"  # submits batches and follows its own
    approver = "approver"  # answers approvals
    admin = "admin"  # everything, every batch
    metrics = "metrics"  # every key's series on /metrics (a Prometheus scraper), no batch


@dataclass(frozen=True)
class Key:
    """An authenticated key, as the routes see it."""

    id: str
    name: str
    role: Role
    roots: tuple[str, ...] | None  # None: not confined to directories
    max_mode: Mode | None  # None: any mode

    @property
    def principal(self) -> str:
        """The submitter the ledger records for its batches, and its usage's `key` label."""
        return f"key:{self.name}"


def mint(
    keys: Keys,
    name: str,
    role: Role,
    *,
    roots: list[str] | None = None,
    max_mode: Mode | None = None,
) -> str:
    """Store a new key and return its token, which is shown this once. A
    submitter key must name the workspace roots it is confined to."""
    if not name or len(name) > 100 or not name.isprintable():
        raise ConfigurationError("a key name is 1 to 100 printable characters")
    if role is Role.submitter and not roots:
        raise ConfigurationError("a submitter key needs at least one --workspace-root")
    for root in roots or []:  # "" or "." would be wherever the gateway happens to start
        if not root.strip() or not Path(root).expanduser().is_absolute():
            raise ConfigurationError(f"--workspace-root {root!r} is not an absolute path")
    resolved = [str(Path(root).expanduser().resolve()) for root in roots or []] or None
    key_id = secrets.token_hex(6)
    token = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    keys.add(
        ApiKeyRow(
            id=key_id,
            name=name,
            role=role.value,
            secret_hash=digest(token),
            workspace_roots=resolved,
            max_mode=max_mode.value if max_mode else None,
        )
    )
    return token


def authenticate(keys: Keys, token: str) -> Key | None:
    """The live key `token` stands for; None for a malformed, unknown, wrong or revoked one."""
    parts = token.removeprefix(PREFIX).split("_", 1) if token.startswith(PREFIX) else []
    if len(parts) != 2 or len(parts[0]) != 12:
        return None
    row = keys.get(parts[0])
    if row is None or row.revoked_at is not None:
        return None
    if not hmac.compare_digest(row.secret_hash, digest(token)):
        return None
    return key_of(row)


def key_of(row: ApiKeyRow) -> Key:
    """The key a stored row stands for (live or not: the caller checks)."""
    return Key(
        id=row.id,
        name=row.name,
        role=Role(row.role),
        roots=tuple(row.workspace_roots) if row.workspace_roots else None,
        max_mode=Mode(row.max_mode) if row.max_mode else None,
    )


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
