"""Keys per purpose, derived from the one signing key (docs/architecture.md,
"Secrets"): task messages, transcripts, approvals, approval notifications
and the approvals page's sessions and CSRF tokens are each signed under a
key of their own, `HMAC-SHA256(signing key, "toolrun/v1/<purpose>")`, so a
signature made for one never verifies as another (a signed task message is no
transcript, whatever its JSON). Every process that holds the signing key
(client, gateway, worker, CLI) derives the same keys, with nothing to
configure; a deployment still sets one secret."""

from __future__ import annotations

import functools
import hashlib
import hmac
from enum import StrEnum


class Purpose(StrEnum):
    task_message = "task-message"
    transcript = "transcript"
    approval = "approval"
    notification = "notification"  # approval webhooks' bodies (runtime/batch/notifying.py)
    page_session = "page-session"  # the approvals page's cookie (runtime/gateway/page/session.py)
    page_csrf = "page-csrf"  # its per-session CSRF token (runtime/gateway/page/csrf.py)
    hook = "hook"  # policy hooks' HTTP requests (runtime/gate/hooks/http_hook.py)
    ledger_seal = "ledger-seal"  # a batch's rows when it ends (runtime/ledger/chain.py)


@functools.lru_cache(maxsize=64)
def derived(key: bytes, purpose: Purpose) -> bytes:
    """The key `purpose` signs with, under the deployment's signing key `key`."""
    return hmac.new(key, f"toolrun/v1/{purpose.value}".encode(), hashlib.sha256).digest()
